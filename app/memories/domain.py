"""Plain domain types passed between API, service and pipelines."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

import msgspec

from app.errors import ConflictError, InvalidInputError, PreconditionFailedError
from app.memories.expiry import resolve_expiry
from app.memories.fields import (
    AgentId,
    Category,
    Content,
    ExpiresAt,
    Instant,
    Language,
    Metadata,
    RunId,
    Scope,
    SessionId,
    Speaker,
    TtlSeconds,
    check_instant,
    check_json_shape,
    check_text,
)
from app.ml.embedder import Embedding
from app.vocabulary import SCOPES

if TYPE_CHECKING:
    from app.db.models import Memory


class MemoryUpdate(msgspec.Struct, forbid_unknown_fields=True):
    """Fields to change in a new version (PATCH's body, and ingestion's UPDATE); an omitted
    (UNSET) field keeps its value."""

    content: Content | msgspec.UnsetType = msgspec.UNSET
    # Omitted: kept, even when the content changes. null: chosen again by the classifier.
    category: Category | msgspec.UnsetType | None = msgspec.UNSET
    scope: Scope | msgspec.UnsetType = msgspec.UNSET
    session_id: SessionId | msgspec.UnsetType | None = msgspec.UNSET
    # Omitted: kept; null: shared by all of the user's agents (no run).
    agent_id: AgentId | msgspec.UnsetType | None = msgspec.UNSET
    run_id: RunId | msgspec.UnsetType | None = msgspec.UNSET
    speaker: Speaker | msgspec.UnsetType | None = msgspec.UNSET
    event_time: Instant | msgspec.UnsetType | None = msgspec.UNSET
    # When the fact ended in the world (omitted: kept; null: not ended).
    event_end: Instant | msgspec.UnsetType | None = msgspec.UNSET
    metadata: Metadata | msgspec.UnsetType = msgspec.UNSET
    # When the memory expires (omitted: kept; null: never), or its time to live from now.
    # Applies to every version of the memory, the earlier ones too.
    expires_at: ExpiresAt | msgspec.UnsetType | None = msgspec.UNSET
    ttl_s: TtlSeconds | msgspec.UnsetType = msgspec.UNSET
    # Omitted: kept while the content stays, detected again when it changes; null: detected.
    language: Language | msgspec.UnsetType | None = msgspec.UNSET

    @property
    def changes_nothing(self) -> bool:
        return all(getattr(self, name) is msgspec.UNSET for name in self.__struct_fields__)


@dataclass(frozen=True, slots=True)
class SaidIn:
    """Where an ingested version was said: its message and, for a fact said as part of the
    message, the message as its context with that context's vector."""

    message_id: uuid.UUID | None
    # When it was said: its words' times resolve against this (MemoryDraft.said_at).
    said_at: datetime | None = None
    context: str | None = None
    context_embedding: Any = None


@dataclass(slots=True)
class MemoryDraft:
    """What a caller wants stored; validated by `check_draft` before anything is written."""

    content: str
    category: str | None = None
    scope: str = "USER"
    session_id: str | None = None
    agent_id: str | None = None  # None: shared by all of the user's agents
    run_id: str | None = None
    speaker: str | None = None
    event_time: datetime | None = None
    event_end: datetime | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    source_message_id: Any = None
    # The content's embedding when the caller already has it (ingestion computed it at step 1):
    # the store embeds only drafts without one, so no text goes through the model twice.
    embedding: Embedding | None = None
    # Conversational context (app/memories/context.py): the previous turn(s) of the session,
    # given by the caller or derived by the store; the memory embedded with it; its predecessor.
    context: str | None = None
    context_embedding: Any = None  # the 768D vector of the contextual text
    # One 768D vector per sentence (app/memories/sentences.py); [] for one sentence.
    sentence_embeddings: list[Any] | None = None
    # The content's multilingual 512D vector (app/ml/multilingual.py); None: none computed.
    embedding_ml: Any = None
    follows_chain_id: Any = None
    mentioned_at: datetime | None = None  # the time the content names (context.mentioned_time)
    # When the content's words were said, in the speaker's UTC offset: what its relative words
    # ("last month") are resolved against, once, when the row is written. None: the event time
    # (a direct write's event_time is when it was said), else the write's time. Ingestion gives
    # the message's time: its event_time is already the resolved one (app/ingest/pipeline.py).
    said_at: datetime | None = None
    # When the memory expires; `ttl_s`, if given instead, becomes it in check_draft.
    expires_at: datetime | None = None
    ttl_s: float | None = None
    # ISO 639-1; None: detected from the content when the row is made (new_version).
    language: str | None = None


def check_content(content: str, max_chars: int, field: str) -> str:
    """The content stripped; a memory's and a message's text obey the same limits."""
    content = content.strip()
    check_text(content, field)
    if not content:
        raise InvalidInputError("content must not be empty", field=field)
    if len(content) > max_chars:
        raise InvalidInputError(
            f"content has {len(content)} characters; at most {max_chars} are allowed", field=field
        )
    return content


def check_metadata(metadata: dict[str, Any], max_bytes: int, field: str) -> None:
    check_json_shape(metadata, field)  # first: json.dumps recurses
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
) -> MemoryDraft:
    """Normalise and validate a draft; raise InvalidInputError naming the offending field.
    Its category is checked against the table by app/memories/categories.py."""
    draft.content = check_content(draft.content, max_chars, f"{field_prefix}content")
    check_metadata(draft.metadata, max_metadata_bytes, f"{field_prefix}metadata")
    # Before the category rule looks the name up in the table, where NUL cannot go.
    check_text(draft.category, f"{field_prefix}category")
    check_text(draft.speaker, f"{field_prefix}speaker")
    check_text(draft.session_id, f"{field_prefix}session_id")
    check_text(draft.agent_id, f"{field_prefix}agent_id")
    check_text(draft.run_id, f"{field_prefix}run_id")
    check_text(draft.context, f"{field_prefix}context")
    draft.event_time = check_instant(draft.event_time, f"{field_prefix}event_time")
    draft.event_end = check_event_end(draft.event_end, draft.event_time, f"{field_prefix}event_end")
    if draft.ttl_s is not None or draft.expires_at is not None:
        draft.expires_at = resolve_expiry(draft.expires_at, draft.ttl_s, field_prefix)
        draft.ttl_s = None
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


# A short id (the first hex digits of a memory id, as MCP tools show it) names a memory within
# its user; 4 digits at least, so that one rarely names several.
MIN_ID_PREFIX = 4
_HEX = frozenset("0123456789abcdef")


def id_prefix_range(raw: str) -> tuple[uuid.UUID, uuid.UUID]:
    """The smallest and largest ids that start with `raw` (hex digits; dashes ignored): a
    range of the primary key, so finding them reads the index, not the user's rows."""
    digits = raw.replace("-", "").lower()
    if not MIN_ID_PREFIX <= len(digits) <= 32 or not set(digits) <= _HEX:
        raise InvalidInputError(
            f"id_prefix {raw[:64]!r} is not the start of a memory id: give {MIN_ID_PREFIX} to "
            "32 hex digits (e.g. the 8 of a short id)",
            field="id_prefix",
        )
    pad = 32 - len(digits)
    return uuid.UUID(digits + "0" * pad), uuid.UUID(digits + "f" * pad)


def check_event_end(end: datetime | None, start: datetime | None, field: str) -> datetime | None:
    """A fact's end in the world: an instant, not before the fact began."""
    end = check_instant(end, field)
    if end is not None and start is not None and end < start:
        raise InvalidInputError(
            f"{field} ({end.isoformat()}) is before event_time ({start.isoformat()}): a fact "
            "cannot end before it began",
            field=field,
        )
    return end


def kept(change: Any, current: Any) -> Any:
    """An update's field: the change, or the current value where the update leaves it UNSET."""
    return current if change is msgspec.UNSET else change


def language_kept(changes: MemoryUpdate, old: Memory) -> str | None:
    """An update's language: the one given; else the old one while the content stays; else
    None, detected again from the new content."""
    if changes.language is not msgspec.UNSET:
        return changes.language
    if changes.content is msgspec.UNSET or changes.content == old.content:
        return old.language
    return None


def checked_current(
    chain_id: uuid.UUID, current: Memory | None, expected_versions: frozenset[uuid.UUID] | None
) -> Memory:
    """The version a write acts on: 409 when the memory has none (deleted), 412 when the
    client's If-Match names other versions (another writer replaced the one it read)."""
    if current is None:
        raise ConflictError(
            f"memory {chain_id} has been deleted: it has no current version to change (its "
            "history stays readable)",
            memory_id=str(chain_id),
        )
    if expected_versions is not None and current.id not in expected_versions:
        named = ", ".join(sorted(str(v) for v in expected_versions))
        raise PreconditionFailedError(
            f"memory {chain_id} has changed: its current version is {current.id}, not the "
            f"one If-Match names ({named}); read it again, then retry with its version",
            memory_id=str(chain_id),
            current_version_id=str(current.id),
        )
    return current
