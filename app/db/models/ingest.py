"""The ingestion pipeline's tables: one task per message and the decisions it led to."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    DateTime,
    Float,
    ForeignKey,
    Identity,
    Index,
    Integer,
    Text,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import UUID
from sqlalchemy.orm import Mapped, mapped_column

from app.db.models.base import Base, in_list, tenant_column
from app.vocabulary import (
    OPERATIONS,
    SCOPES,
)

TASK_STATES = ("queued", "running", "done", "failed")
EXTRACTORS = ("llm", "deterministic")
LLM_GATES = ("call", "skip")


class IngestTask(Base):
    """The ingestion jobs table: one row per message, taken with FOR UPDATE SKIP LOCKED.

    A job (what POST /messages returns) is the set of tasks sharing `job_id`."""

    __tablename__ = "ingest_tasks"

    tenant_id: Mapped[uuid.UUID] = tenant_column()

    message_id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), ForeignKey("messages.id", ondelete="CASCADE"), primary_key=True
    )
    job_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), nullable=False)
    user_id: Mapped[str] = mapped_column(Text, nullable=False)
    queue: Mapped[str] = mapped_column(Text, nullable=False, server_default="default")
    # Copy of the message timestamp: a user's tasks are applied in (sent_at, message_id) order.
    sent_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    # Scope the caller asked for (CONTEXT binds the memories to the message's session).
    scope: Mapped[str | None] = mapped_column(Text)
    state: Mapped[str] = mapped_column(Text, nullable=False, server_default="queued")
    attempts: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    available_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), nullable=False, server_default=func.now()
    )
    lease_token: Mapped[uuid.UUID | None] = mapped_column(UUID(as_uuid=True))
    lease_expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    last_error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), nullable=False, server_default=func.now()
    )
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # The W3C traceparent of the request that queued the task, when it was traced: the
    # worker's spans continue that trace (0035_task_traceparent).
    traceparent: Mapped[str | None] = mapped_column(Text)

    __table_args__ = (
        CheckConstraint(in_list("state", TASK_STATES), name="state"),
        CheckConstraint("scope IS NULL OR " + in_list("scope", SCOPES), name="scope"),
        Index(None, "job_id"),
        Index(
            "ingest_tasks_open_idx",
            "user_id",
            "sent_at",
            "message_id",
            postgresql_where=text("state IN ('queued', 'running')"),
        ),
        # Finished tasks, oldest first: the retention job's (0026).
        Index(
            "ingest_tasks_finished_idx",
            "finished_at",
            postgresql_where=text("state IN ('done', 'failed')"),
        ),
    )


class IngestDecision(Base):
    """Audit trail: every decision taken for a message, applied or not, and how it was made."""

    __tablename__ = "ingest_decisions"

    tenant_id: Mapped[uuid.UUID] = tenant_column()

    id: Mapped[int] = mapped_column(BigInteger, Identity(always=True), primary_key=True)
    job_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), nullable=False)
    message_id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), ForeignKey("messages.id", ondelete="CASCADE"), nullable=False
    )
    user_id: Mapped[str] = mapped_column(Text, nullable=False)
    position: Mapped[int] = mapped_column(Integer, nullable=False)
    operation: Mapped[str] = mapped_column(Text, nullable=False)
    # The existing version an UPDATE/DELETE/NONE refers to; the version an ADD/UPDATE wrote.
    target_memory_id: Mapped[uuid.UUID | None] = mapped_column(UUID(as_uuid=True))
    memory_id: Mapped[uuid.UUID | None] = mapped_column(UUID(as_uuid=True))
    content: Mapped[str | None] = mapped_column(Text)
    category: Mapped[str | None] = mapped_column(Text)
    reason: Mapped[str | None] = mapped_column(Text)
    # When the fact happened, as written to the memory (ADD, UPDATE).
    event_time: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    extractor: Mapped[str] = mapped_column(Text, nullable=False)
    # Whether the LLM was asked ("call") or the gate decided without it ("skip"); null when
    # no LLM is configured. gate_similarity: the nearest current memory's cosine it judged.
    llm_gate: Mapped[str | None] = mapped_column(Text)
    gate_similarity: Mapped[float | None] = mapped_column(Float)
    # The version of the prompt the LLM was shown (app/ingest/prompt.py PROMPT_VERSION).
    prompt_version: Mapped[str | None] = mapped_column(Text)
    model: Mapped[str | None] = mapped_column(Text)
    raw_answer_sha256: Mapped[str | None] = mapped_column(Text)
    latency_ms: Mapped[float | None] = mapped_column(Float)
    fallback_used: Mapped[bool] = mapped_column(
        Boolean, nullable=False, server_default=text("false")
    )
    # Why the LLM's answers were rejected (or the call failed) when the fallback ran.
    failure: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), nullable=False, server_default=func.now()
    )

    __table_args__ = (
        CheckConstraint(in_list("operation", OPERATIONS), name="operation"),
        CheckConstraint(in_list("extractor", EXTRACTORS), name="extractor"),
        CheckConstraint("llm_gate IS NULL OR " + in_list("llm_gate", LLM_GATES), name="llm_gate"),
        Index(None, "message_id"),
        Index(None, "job_id"),
        Index(None, "user_id", "created_at"),
        # An analyst's queries over its whole tenant, per day, or of one user (0037).
        Index(None, "tenant_id", "user_id", "created_at"),
        # The decision behind a memory version, for an analyst's chain history (0040).
        Index(None, "memory_id"),
    )
