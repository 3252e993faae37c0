"""Writes answered before they are done: stored idempotent responses and batch jobs."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import (
    CheckConstraint,
    DateTime,
    Index,
    Integer,
    LargeBinary,
    SmallInteger,
    Text,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, UUID
from sqlalchemy.orm import Mapped, mapped_column

from app.db.models.base import Base, in_list, tenant_column
from app.db.models.ingest import TASK_STATES

IDEMPOTENCY_STATES = ("running", "done")


class IdempotencyKey(Base):
    """A write sent with an Idempotency-Key, and the response it got (app/idempotency): a
    retry with the same key, user and request is answered with that response instead of
    writing again. Written in the write's own transaction; kept until `expires_at`
    (COGNIS_IDEMPOTENCY_TTL_S), then deleted by the retention job (app/db/retention.py).

    A memory write stores its row `done`, response and all, at commit. A message submission
    stores it `running` with its job when step 1 commits, and `done` once it has answered."""

    __tablename__ = "idempotency_keys"

    tenant_id: Mapped[uuid.UUID] = tenant_column(primary_key=True)
    user_id: Mapped[str] = mapped_column(Text, primary_key=True)
    key: Mapped[str] = mapped_column(Text, primary_key=True)
    # Method and route template, e.g. "PATCH /v1/users/{user_id}/memories/{memory_id}".
    route: Mapped[str] = mapped_column(Text, nullable=False)
    # SHA-256 of the method, path, query and canonical JSON body: "the same request".
    request_hash: Mapped[bytes] = mapped_column(LargeBinary, nullable=False)
    state: Mapped[str] = mapped_column(Text, nullable=False)
    job_id: Mapped[uuid.UUID | None] = mapped_column(UUID(as_uuid=True))
    response_status: Mapped[int | None] = mapped_column(SmallInteger)
    # The body exactly as first sent (JSON bytes), so a replay is byte for byte the same.
    response_body: Mapped[bytes | None] = mapped_column(LargeBinary)
    created_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), nullable=False, server_default=func.now()
    )
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)

    __table_args__ = (
        CheckConstraint(in_list("state", IDEMPOTENCY_STATES), name="state"),
        CheckConstraint(
            "state = 'running' OR (response_status IS NOT NULL AND response_body IS NOT NULL)",
            name="done_has_response",
        ),
        Index(None, "expires_at"),
    )


BATCH_JOB_STATES = TASK_STATES


class BatchJob(Base):
    """A batch create answered 202 (0022): its validated memories, written later in one
    transaction by a worker (app/memories/batch_jobs.py), which claims it with FOR UPDATE SKIP
    LOCKED and holds it under a renewed lease, as ingestion tasks are held. Deleted with the
    user by an erase."""

    __tablename__ = "batch_jobs"

    tenant_id: Mapped[uuid.UUID] = tenant_column()

    id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True, default=uuid.uuid4)
    user_id: Mapped[str] = mapped_column(Text, nullable=False)
    # The accepting process's COGNIS_INGEST_QUEUE: only workers of that queue take it.
    queue: Mapped[str] = mapped_column(Text, nullable=False, server_default="default")
    # The drafts, validated and as JSON (app/memories/batch_jobs.py `drafts_as_json`); emptied
    # once the job is done or failed, so that only a job in flight holds memories' content.
    batch: Mapped[list[dict[str, Any]]] = mapped_column(JSONB, nullable=False)
    memories: Mapped[int] = mapped_column(Integer, nullable=False)
    status: Mapped[str] = mapped_column(Text, nullable=False, server_default="queued")
    attempts: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    error: Mapped[str | None] = mapped_column(Text)
    available_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), nullable=False, server_default=func.now()
    )
    lease_token: Mapped[uuid.UUID | None] = mapped_column(UUID(as_uuid=True))
    lease_expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # The memories written, in batch order (null until done).
    memory_ids: Mapped[list[uuid.UUID] | None] = mapped_column(ARRAY(UUID(as_uuid=True)))
    created_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), nullable=False, server_default=func.now()
    )
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # The W3C traceparent of the request that queued the job, when it was traced: the
    # worker's spans continue that trace (0038_batch_job_traceparent).
    traceparent: Mapped[str | None] = mapped_column(Text)

    __table_args__ = (
        CheckConstraint(in_list("status", BATCH_JOB_STATES), name="status"),
        Index(
            "batch_jobs_open_idx",
            "queue",
            "created_at",
            postgresql_where=text(in_list("status", ("queued", "running"))),
        ),
        Index(None, "user_id"),
        # Finished jobs, oldest first: the retention job's (0026).
        Index(
            "batch_jobs_finished_idx",
            "finished_at",
            postgresql_where=text(in_list("status", ("done", "failed"))),
        ),
    )
