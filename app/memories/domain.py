"""Plain domain types passed between API, service and pipelines."""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from app.config import CATEGORIES, SCOPES
from app.errors import InvalidInputError
from app.ml.embedder import Embedding

USER_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@\-]{0,127}$")


@dataclass(slots=True)
class MemoryDraft:
    """What a caller wants stored; validated by `check_draft` before anything is written."""

    content: str
    category: str | None = None
    scope: str = "USER"
    session_id: str | None = None
    speaker: str | None = None
    event_time: datetime | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    source_message_id: Any = None
    # The content's embedding when the caller already has it (ingestion computed it at step 1):
    # the store embeds only drafts without one, so no text goes through the model twice.
    embedding: Embedding | None = None


def check_user_id(user_id: str) -> str:
    if not USER_ID_PATTERN.match(user_id):
        raise InvalidInputError(
            "user_id must be 1-128 characters: letters, digits and _ . : @ -, "
            "starting with a letter or digit",
            field="user_id",
        )
    return user_id


def check_content(content: str, max_chars: int, field: str) -> str:
    """The content stripped; a memory's and a message's text obey the same limits."""
    content = content.strip()
    if not content:
        raise InvalidInputError("content must not be empty", field=field)
    if len(content) > max_chars:
        raise InvalidInputError(
            f"content has {len(content)} characters; at most {max_chars} are allowed", field=field
        )
    return content


def check_metadata(metadata: dict[str, Any], max_bytes: int, field: str) -> None:
    size = len(json.dumps(metadata, separators=(",", ":")).encode())
    if size > max_bytes:
        raise InvalidInputError(
            f"metadata is {size} bytes as JSON; at most {max_bytes} are allowed", field=field
        )


def check_draft(
    draft: MemoryDraft,
    max_chars: int,
    max_metadata_bytes: int,
    field_prefix: str = "",
    categories: tuple[str, ...] = CATEGORIES,
) -> MemoryDraft:
    """Normalise and validate a draft; raise InvalidInputError naming the offending field."""
    draft.content = check_content(draft.content, max_chars, f"{field_prefix}content")
    check_metadata(draft.metadata, max_metadata_bytes, f"{field_prefix}metadata")
    if draft.category is not None and draft.category not in categories:
        raise InvalidInputError(
            f"unknown category {draft.category!r}; expected one of: {', '.join(categories)}",
            field=f"{field_prefix}category",
        )
    if draft.scope not in SCOPES:
        raise InvalidInputError(
            f"scope must be USER or CONTEXT, not {draft.scope!r}", field=f"{field_prefix}scope"
        )
    if draft.scope == "CONTEXT" and not draft.session_id:
        raise InvalidInputError(
            "a CONTEXT memory belongs to one session: give its session_id",
            field=f"{field_prefix}session_id",
        )
    return draft


def parse_memory_id(raw: str) -> uuid.UUID:
    try:
        return uuid.UUID(raw)
    except ValueError as exc:
        raise InvalidInputError(f"memory id {raw[:64]!r} is not a UUID", field="memory_id") from exc
