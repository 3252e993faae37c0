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


def check_draft(
    draft: MemoryDraft, max_chars: int, max_metadata_bytes: int, field_prefix: str = ""
) -> MemoryDraft:
    """Normalise and validate a draft; raise InvalidInputError naming the offending field."""
    content = draft.content.strip()
    if not content:
        raise InvalidInputError("content must not be empty", field=f"{field_prefix}content")
    if len(content) > max_chars:
        raise InvalidInputError(
            f"content has {len(content)} characters; at most {max_chars} are allowed",
            field=f"{field_prefix}content",
        )
    draft.content = content
    metadata_bytes = len(json.dumps(draft.metadata, separators=(",", ":")).encode())
    if metadata_bytes > max_metadata_bytes:
        raise InvalidInputError(
            f"metadata is {metadata_bytes} bytes as JSON; at most {max_metadata_bytes} are allowed",
            field=f"{field_prefix}metadata",
        )
    if draft.category is not None and draft.category not in CATEGORIES:
        raise InvalidInputError(
            f"unknown category {draft.category!r}; expected one of: {', '.join(CATEGORIES)}",
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
