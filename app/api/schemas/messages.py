"""Wire schemas of the ingestion endpoints: messages in, jobs and decisions out."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Literal

import msgspec

from app.db.models import IngestDecision
from app.ingest.domain import Extraction, Operation
from app.memories.fields import (
    AgentId,
    Content,
    Instant,
    Metadata,
    RunId,
    Scope,
    SessionId,
    Speaker,
)
from app.vocabulary import MAX_BATCH_ITEMS

IdempotencyKey = Annotated[str, msgspec.Meta(min_length=1, max_length=256)]


class MessageIn(msgspec.Struct, forbid_unknown_fields=True):
    content: Content
    role: Literal["user", "assistant", "system"] = "user"
    speaker: Speaker | None = None
    timestamp: Instant | None = None  # when it was said; back-dated imports are normal
    session_id: SessionId | None = None
    # The memories derived from the message belong to its agent and run (null: shared).
    agent_id: AgentId | None = None
    run_id: RunId | None = None
    metadata: Metadata = msgspec.field(default_factory=dict)
    idempotency_key: IdempotencyKey | None = None
    scope: Scope | None = None  # CONTEXT: the memories belong to this message's session


class MessagesIn(msgspec.Struct, forbid_unknown_fields=True):
    messages: Annotated[list[MessageIn], msgspec.Meta(min_length=1, max_length=MAX_BATCH_ITEMS)]


class DecisionOut(msgspec.Struct):
    operation: str
    target_memory_id: uuid.UUID | None
    memory_id: uuid.UUID | None
    content: str | None
    category: str | None
    reason: str | None
    event_time: datetime | None = None
    extractor: str | None = None
    model: str | None = None
    fallback_used: bool = False
    failure: str | None = None
    raw_answer_sha256: str | None = None
    latency_ms: float | None = None
    prompt_version: str | None = None
    llm_gate: str | None = None  # "call" | "skip"; null when no LLM is configured
    gate_similarity: float | None = None

    @classmethod
    def of(cls, d: IngestDecision) -> DecisionOut:
        return cls(
            operation=d.operation,
            target_memory_id=d.target_memory_id,
            memory_id=d.memory_id,
            content=d.content,
            category=d.category,
            reason=d.reason,
            event_time=d.event_time,
            extractor=d.extractor,
            model=d.model,
            fallback_used=d.fallback_used,
            failure=d.failure,
            raw_answer_sha256=d.raw_answer_sha256,
            latency_ms=d.latency_ms,
            prompt_version=d.prompt_version,
            llm_gate=d.llm_gate,
            gate_similarity=d.gate_similarity,
        )

    @classmethod
    def planned(cls, op: Operation, extraction: Extraction) -> DecisionOut:
        """A dry run's decision: how it would be applied and how it was obtained."""
        return cls(
            operation=op.op,
            target_memory_id=op.target.memory_id if op.target else None,
            memory_id=None,
            content=op.content,
            category=op.category,
            reason=op.reason,
            event_time=op.event_time,
            extractor=extraction.extractor,
            model=extraction.model,
            fallback_used=extraction.fallback_used,
            failure=extraction.failure,
            raw_answer_sha256=extraction.raw_answer_sha256,
            latency_ms=extraction.latency_ms,
            prompt_version=extraction.prompt_version,
            llm_gate=extraction.llm_gate,
            gate_similarity=extraction.gate_similarity,
        )


class SubmittedMessageOut(msgspec.Struct):
    message_id: uuid.UUID
    job_id: uuid.UUID
    duplicate: bool


class MessageResultOut(msgspec.Struct):
    message_id: uuid.UUID
    sent_at: datetime
    state: str
    attempts: int
    last_error: str | None
    decisions: list[DecisionOut]


class JobOut(msgspec.Struct):
    job_id: uuid.UUID
    user_id: str
    state: str  # queued | running | done | failed
    messages: list[MessageResultOut]
    submitted: list[SubmittedMessageOut] | None = None


class DryRunMessageOut(msgspec.Struct):
    content: str
    sent_at: datetime
    speaker: str | None
    extractor: str
    fallback_used: bool
    failure: str | None
    decisions: list[DecisionOut]


class DryRunOut(msgspec.Struct):
    dry_run: bool
    messages: list[DryRunMessageOut]
