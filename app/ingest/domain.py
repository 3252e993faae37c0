"""Plain data passed between the ingestion steps."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from app.ml.embedder import Embedding
from app.time_expressions import TimeWindow, utc_offset_minutes

ROLES = ("user", "assistant", "system")


@dataclass(slots=True)
class IncomingMessage:
    """One conversation message as submitted, before it is saved."""

    content: str
    sent_at: datetime
    role: str = "user"
    speaker: str | None = None
    session_id: str | None = None
    agent_id: str | None = None
    run_id: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    idempotency_key: str | None = None
    # CONTEXT binds the message's memories to its session; None lets the extractor decide.
    scope: str | None = None

    @property
    def utc_offset_minutes(self) -> int | None:
        """The sender's offset, as the timestamp gave it (a naive one counts as UTC)."""
        return utc_offset_minutes(self.sent_at)


@dataclass(frozen=True, slots=True)
class SavedMessage:
    message_id: uuid.UUID
    job_id: uuid.UUID
    duplicate: bool


@dataclass(frozen=True, slots=True)
class MessageContext:
    """Step 2's output: who said it, when, and what its time expressions mean."""

    user_id: str
    message_id: uuid.UUID | None  # None in a dry run: nothing was saved
    content: str
    role: str
    speaker: str | None
    session_id: str | None
    sent_at: datetime
    scope: str | None
    windows: list[TimeWindow]
    # Step 1's embedding of the content (None for a dry run or a message saved before 0005).
    embedding: Embedding | None = None
    # The message's agent and run: its new memories get them, and step 3 compares it with
    # what that agent and run see (app/memories/filters/, visible_to).
    agent_id: str | None = None
    run_id: str | None = None
    # The message's metadata: every memory it produces carries it (an UPDATE merges it over the
    # memory's own), so a metadata filter finds them.
    metadata: dict[str, Any] = field(default_factory=dict)
    # Vectors of other texts step 3 may embed (its sentences, a correction's claim), computed
    # beforehand in the worker's one model call for its claim (IngestPipeline.texts_to_prefetch).
    prefetched: Mapping[str, Embedding] = field(default_factory=dict)

    @property
    def event_time(self) -> datetime:
        """When the message's fact happened: its first time expression, else when it was said."""
        return self.windows[0].start if self.windows else self.sent_at


@dataclass(frozen=True, slots=True)
class Candidate:
    """An existing current memory shown to the extractor, under a short reference."""

    ref: str
    memory_id: uuid.UUID
    content: str
    category: str
    scope: str
    session_id: str | None
    event_time: datetime | None
    similarity: float
    # Who said it, where known: "I" in a memory is its speaker.
    speaker: str | None = None
    # Its metadata: an UPDATE from a message with metadata merges the message's over it.
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class Operation:
    """One validated decision: ADD / UPDATE / DELETE / NONE."""

    op: str
    content: str | None = None
    category: str | None = None
    scope: str = "USER"
    target: Candidate | None = None
    reason: str | None = None
    event_time: datetime | None = None
    # The message a fact was said in, when the fact is only part of it: the new version's
    # context (app/memories/context.py), embedded as the message was.
    turn: str | None = None
    # Filled in by step 4.
    memory_id: uuid.UUID | None = None


@dataclass(slots=True)
class Extraction:
    """Step 3's output for one message, with how it was obtained (for the audit trail)."""

    operations: list[Operation]
    extractor: str  # "llm" | "deterministic"
    model: str | None = None
    raw_answer_sha256: str | None = None
    latency_ms: float | None = None
    fallback_used: bool = False
    failure: str | None = None
    prompt_version: str | None = None
    # The LLM gate's verdict ("call" | "skip", None without an LLM) and the similarity it judged.
    llm_gate: str | None = None
    gate_similarity: float | None = None
