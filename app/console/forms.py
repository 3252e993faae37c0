"""The console's forms read into the API's terms: a search's floor and filter, the version a
change was made from, a dry run's message (typed, or a stored one replayed)."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, timedelta, timezone
from typing import Any
from urllib.parse import quote

from cognis_client import CognisError, History

from app.db.models import Message


def relevance_floor(text: str | None) -> float | None:
    """The search form's floor: empty is none; the API checks the range."""
    if text is None or not text.strip():
        return None
    try:
        return float(text)
    except ValueError:
        raise CognisError(
            400, "Invalid floor", f"min relevance must be a number from 0 to 1, not {text!r}", {}
        ) from None


def filter_language(text: str) -> Any:
    """The filter bar's JSON, parsed; not JSON: the same kind of error page as the API's 400
    (the API checks the filter itself)."""
    try:
        return json.loads(text)
    except ValueError as error:
        raise CognisError(
            400,
            "Invalid filter",
            f"the filter is not JSON ({error}); write it in the filter language, e.g. "
            '{"field": "category", "op": "eq", "value": "hobbies"}',
            {},
        ) from None


DRY_RUN_SCOPES = {"session_id": "", "agent_id": "", "run_id": ""}
DRY_RUN_FIELDS = ("content", "speaker", "timestamp", "role", *DRY_RUN_SCOPES)


def selected_version(history: History, memory_id: str) -> str:
    """The version a chain page selects: the one a version's id names, else (the memory's
    id) the current version, or the last one of a deleted memory."""
    if memory_id in {str(history.id), str(history.chain_id)}:
        shown = history.current or history.versions[-1]
        return str(shown.version_id or shown.id)
    return memory_id


def shown_version(form: dict[str, str]) -> str | None:
    """The version a page showed when its form was posted (If-Match): a change made from a
    page that someone else's change has overtaken since is refused (412), not applied."""
    return form.get("version") or None


def user_path(user_id: str, rest: str = "") -> str:
    return f"/console/users/{quote(user_id, safe='')}{rest}"


def message_id(text: str) -> uuid.UUID:
    try:
        return uuid.UUID(text)
    except ValueError:
        raise CognisError(400, "Invalid message id", f"{text[:64]!r} is not a UUID", {}) from None


def replay_form(stored: Message) -> dict[str, str]:
    """A stored message as the dry run's form: said when and by whom it was, in its sender's
    UTC offset (relative dates resolve against that)."""
    offset = timedelta(minutes=stored.utc_offset_minutes or 0)
    sent_at = stored.sent_at.astimezone(timezone(offset) if offset else UTC)
    return {
        "content": stored.content,
        "speaker": stored.speaker or "",
        "timestamp": sent_at.isoformat(),
        "role": stored.role,
        "session_id": stored.session_id or "",
        "agent_id": stored.agent_id or "",
        "run_id": stored.run_id or "",
    }
