"""One import line: decoded, validated and turned into a draft, or into a clear error.

Our line shape is `ImportLine`; mem0's export shape is read by `app.imports.mem0`. Content,
category, scope and metadata rules are the memory store's own (`check_draft`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, Literal

import msgspec
import numpy as np

from app.errors import InvalidInputError
from app.imports.mem0 import MEM0_FIELD_NAMES, MEM0_KEYS, Mem0Memory, mem0_fields
from app.memories.domain import MemoryDraft, check_draft
from app.memories.fields import (
    MAX_METADATA_DEPTH,
    AgentId,
    ExpiresAt,
    Language,
    Metadata,
    RunId,
    SessionId,
    Speaker,
    TtlSeconds,
    check_text,
    check_user_id,
    unstorable_in_json,
)
from app.time_expressions import as_aware
from app.vocabulary import EMBEDDING_DIM, Scope

LineFormat = Literal["auto", "jsonl", "mem0"]
# What a line's own user_id means. "use": it names the memory's user, `user_id` being the
# fallback (the CLI without --user). "ignore": every line is `user_id`'s (the CLI's --user).
# "must_match": every line is `user_id`'s and naming another user is an error (the endpoint).
LineUsers = Literal["use", "ignore", "must_match"]
ExternalId = Annotated[str, msgspec.Meta(min_length=1, max_length=256)]


class ImportLine(msgspec.Struct, forbid_unknown_fields=True):
    """Our line shape. Unknown fields are errors: a misspelt "catgory" must not pass silently."""

    content: str
    external_id: ExternalId
    speaker: Speaker | None = None
    event_time: datetime | None = None
    session_id: SessionId | None = None
    agent_id: AgentId | None = None
    run_id: RunId | None = None
    scope: Scope = "USER"
    category: str | None = None
    metadata: Metadata | None = None
    # Precomputed with the service's embedding model: 768 numbers, any length (normalised here).
    embedding: list[float] | None = None
    # Whose memory; the CLI's --user and the endpoint's path take precedence.
    user_id: str | None = None
    # When it expires (in the future), or its time to live in seconds from the import.
    expires_at: ExpiresAt | None = None
    ttl_s: TtlSeconds | None = None
    # ISO 639-1; omitted: detected from the content.
    language: Language | None = None


@dataclass(frozen=True, slots=True)
class LineError:
    line: int
    field: str | None
    detail: str


@dataclass(slots=True)
class ImportDraft:
    """A valid line: whose memory, its external id, the draft, and its vector when given."""

    line: int
    user_id: str
    external_id: str
    draft: MemoryDraft
    vector: np.ndarray | None = None

    @property
    def key(self) -> tuple[str, str]:
        return (self.user_id, self.external_id)


@dataclass(frozen=True, slots=True)
class LineRules:
    """What a line may be: its format, its user, the store's size limits."""

    user_id: str | None
    line_users: LineUsers
    line_format: LineFormat
    max_content_chars: int
    max_metadata_bytes: int


_FIELD_AT = re.compile(r"at `\$\.([A-Za-z_]+)")
_FIELD_NAMED = re.compile(r"field `([^`]+)`")


def parse_line(number: int, raw: bytes, rules: LineRules) -> ImportDraft | LineError:
    """Decode and validate one line (or one item of a JSON list)."""
    try:
        obj = msgspec.json.decode(raw)
    except msgspec.DecodeError as exc:
        # Our line shape's fields named; a mem0 record's lone surrogate stays "not valid JSON".
        unstorable = unstorable_in_json(raw, ImportLine)
        if unstorable is not None:
            return LineError(number, unstorable.extra.get("field"), unstorable.detail)
        return LineError(number, None, f"not valid JSON: {exc}")
    except RecursionError:
        # POST /memories answers the same with a 400; here it is this line's error.
        return LineError(
            number,
            None,
            f"nested too deeply to read: metadata may nest at most {MAX_METADATA_DEPTH} levels",
        )
    if not isinstance(obj, dict):
        return LineError(number, None, f"expected a JSON object, got {type(obj).__name__}")
    is_mem0 = rules.line_format == "mem0" or (
        rules.line_format == "auto" and "content" not in obj and obj.keys() >= MEM0_KEYS
    )
    try:
        if is_mem0:
            fields = mem0_fields(msgspec.convert(obj, Mem0Memory))
        else:
            fields = msgspec.structs.asdict(msgspec.convert(obj, ImportLine))
        return _draft(number, fields, rules)
    except msgspec.ValidationError as exc:
        return LineError(number, _field_of(str(exc)), str(exc))
    except InvalidInputError as exc:
        field: str | None = exc.extra.get("field")
        if is_mem0 and field is not None:  # name the field as the record has it
            field = MEM0_FIELD_NAMES.get(field, field)
        return LineError(number, field, exc.detail)


def _draft(number: int, fields: dict[str, Any], rules: LineRules) -> ImportDraft:
    user_id = _user_of(fields.pop("user_id"), rules)
    event_time = as_aware(fields["event_time"]) if fields["event_time"] is not None else None
    draft = MemoryDraft(
        content=fields["content"],
        category=fields["category"],
        scope=fields["scope"],
        session_id=fields["session_id"],
        agent_id=fields["agent_id"],
        run_id=fields["run_id"],
        speaker=fields["speaker"],
        event_time=event_time,
        metadata=fields["metadata"] or {},
        expires_at=fields.get("expires_at"),
        ttl_s=fields.get("ttl_s"),
        language=fields.get("language"),
    )
    check_draft(draft, rules.max_content_chars, rules.max_metadata_bytes)
    check_text(fields["external_id"], "external_id")
    vector = None if fields["embedding"] is None else _vector(fields["embedding"])
    return ImportDraft(number, user_id, fields["external_id"], draft, vector)


def _user_of(line_user: str | None, rules: LineRules) -> str:
    if rules.line_users == "use" and line_user is not None:
        return check_user_id(line_user)
    if rules.user_id is None:
        raise InvalidInputError("no user: give user_id in the line or --user", field="user_id")
    if rules.line_users == "must_match" and line_user is not None and line_user != rules.user_id:
        raise InvalidInputError(
            f"the line belongs to user {line_user[:128]!r}, not to {rules.user_id!r}",
            field="user_id",
        )
    return rules.user_id


def _vector(numbers: list[float]) -> np.ndarray:
    if len(numbers) != EMBEDDING_DIM:
        raise InvalidInputError(
            f"embedding has {len(numbers)} numbers; expected {EMBEDDING_DIM}", field="embedding"
        )
    vector = np.asarray(numbers, dtype=np.float32)
    norm = float(np.linalg.norm(vector))
    if not math.isfinite(norm) or norm == 0.0:
        raise InvalidInputError(
            "embedding must be finite numbers with a non-zero length", field="embedding"
        )
    return vector


def _field_of(message: str) -> str | None:
    match = _FIELD_AT.search(message) or _FIELD_NAMED.search(message)
    return match.group(1) if match else None
