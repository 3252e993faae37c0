"""Batch jobs: a batch create that needs more model time than its request's deadline is kept,
validated, in `batch_jobs` (in the request's transaction) and answered 202; a worker
(app/ingest/batch_worker.py) writes it later. Every query of the table is here, and a job
that finishes (done, or failed for good) queues its `batch_job.done` webhook event in the
transaction that says so."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import and_, func, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from app import tracing
from app.db.models import BatchJob, Memory
from app.memories.domain import MemoryDraft
from app.webhooks import events as webhook_events

# The draft fields a request gives (the rest are derived when the job runs: embeddings,
# context links, mentioned times), and those of them that are instants.
_GIVEN = (
    "content",
    "category",
    "scope",
    "session_id",
    "agent_id",
    "run_id",
    "speaker",
    "event_time",
    "event_end",
    "metadata",
    "context",
    "expires_at",
    "language",  # jobs queued before it have none: detected
)
_INSTANTS = ("event_time", "event_end", "expires_at")


def drafts_as_json(drafts: list[MemoryDraft]) -> list[dict[str, Any]]:
    """Validated drafts as the job keeps them: what the request gave, `ttl_s` already turned
    into `expires_at` (the expiry runs from the request, not from the job)."""
    rows = []
    for draft in drafts:
        row = {name: getattr(draft, name) for name in _GIVEN}
        for name in _INSTANTS:
            if row[name] is not None:
                row[name] = row[name].isoformat()
        rows.append(row)
    return rows


def drafts_from_json(rows: list[dict[str, Any]]) -> list[MemoryDraft]:
    drafts = []
    for row in rows:
        fields: dict[str, Any] = {name: row.get(name) for name in _GIVEN}
        for name in _INSTANTS:
            if fields[name] is not None:
                fields[name] = datetime.fromisoformat(fields[name])
        fields["metadata"] = fields["metadata"] or {}
        drafts.append(MemoryDraft(**fields))
    return drafts


@dataclass(frozen=True, slots=True)
class ClaimedJob:
    """A job a worker holds under `token` until its lease runs out (renewed while it works)."""

    id: uuid.UUID
    tenant_id: uuid.UUID
    user_id: str
    drafts: list[MemoryDraft]
    attempts: int
    token: uuid.UUID
    # The W3C traceparent of the request that queued it (when traced): the job's spans
    # continue that trace.
    traceparent: str | None = None


class BatchJobRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    # A request's side, in its tenant.
    async def queue(self, user_id: str, drafts: list[MemoryDraft], queue: str) -> BatchJob:
        """A new queued job of these validated drafts on `queue`, in the caller's transaction,
        with the request's trace context (tracing on) for the worker to continue."""
        job = BatchJob(
            id=uuid.uuid4(),
            user_id=user_id,
            queue=queue,
            batch=drafts_as_json(drafts),
            memories=len(drafts),
            status="queued",
            attempts=0,
            traceparent=tracing.traceparent(),
        )
        self.session.add(job)
        await self.session.flush()
        await self.session.refresh(job, ["created_at"])
        return job

    async def get(self, user_id: str, job_id: uuid.UUID) -> BatchJob | None:
        return await self.session.scalar(
            select(BatchJob).where(BatchJob.user_id == user_id, BatchJob.id == job_id)
        )

    async def written(self, user_id: str, job: BatchJob) -> list[Memory]:
        """The memory versions a done job wrote, in batch order, in one query (the user's
        only: an id of another user's is not read)."""
        ids = job.memory_ids or []
        if not ids:
            return []
        rows = await self.session.scalars(
            select(Memory).where(Memory.user_id == user_id, Memory.id.in_(ids))
        )
        by_id = {m.id: m for m in rows}
        return [by_id[i] for i in ids if i in by_id]

    async def open_count(self) -> int:
        """Jobs queued or running (every tenant's, on the background role): the backlog."""
        count = await self.session.scalar(
            select(func.count()).where(BatchJob.status.in_(("queued", "running")))
        )
        return int(count or 0)

    # The worker's side: across tenants (the background role, no tenant bound), then in the
    # job's tenant for the write.
    async def claim(self, lease: timedelta, queue: str) -> BatchJob | None:
        """The oldest job of `queue` that is due: queued (past its backoff) or running with a
        lease that ran out (its worker died); locked with SKIP LOCKED, so workers never share
        one, and leased to the caller (attempts counted). None when none is due."""
        now = func.now()
        job = await self.session.scalar(
            select(BatchJob)
            .where(
                BatchJob.queue == queue,
                or_(
                    and_(BatchJob.status == "queued", BatchJob.available_at <= now),
                    and_(BatchJob.status == "running", BatchJob.lease_expires_at < now),
                ),
            )
            .order_by(BatchJob.created_at)
            .limit(1)
            .with_for_update(skip_locked=True)
        )
        if job is None:
            return None
        job.status = "running"
        job.attempts += 1
        job.lease_token = uuid.uuid4()
        job.lease_expires_at = await self.session.scalar(select(now + lease))
        await self.session.flush()
        return job

    async def renew_lease(self, job_id: uuid.UUID, token: uuid.UUID, lease: timedelta) -> bool:
        """The worker's heartbeat; False once the job is not its own any more."""
        job = await self._owned(job_id, token)
        if job is None:
            return False
        job.lease_expires_at = await self.session.scalar(select(func.now() + lease))
        await self.session.flush()
        return True

    async def _owned(self, job_id: uuid.UUID, token: uuid.UUID) -> BatchJob | None:
        return await self.session.scalar(
            select(BatchJob)
            .where(
                BatchJob.id == job_id,
                BatchJob.lease_token == token,
                BatchJob.status == "running",
            )
            .with_for_update()
        )

    async def finish(
        self, job_id: uuid.UUID, token: uuid.UUID, memory_ids: list[uuid.UUID]
    ) -> bool:
        """Mark the job done with the memories it wrote, in the transaction that wrote them;
        False (nothing marked) when it is not the caller's any more: taken over after its lease
        ran out, or erased with its user."""
        job = await self._owned(job_id, token)
        if job is None:
            return False
        job.status = "done"
        job.memory_ids = memory_ids
        job.batch = []  # the memories hold the content now: the job keeps none of it
        job.error = None
        await self._finished(job)
        return True

    async def release(
        self,
        job_id: uuid.UUID,
        token: uuid.UUID,
        error: str,
        retry_in: timedelta | None,
    ) -> BatchJob | None:
        """A failed attempt: the job queued again after `retry_in`, or (None) failed for good,
        with the error; None when it is not the caller's any more."""
        job = await self._owned(job_id, token)
        if job is None:
            return None
        job.error = error
        if retry_in is None:
            job.status = "failed"
            job.batch = []  # never to be written: the job keeps none of its content
            await self._finished(job)
        else:
            job.status = "queued"
            job.lease_token = None
            job.lease_expires_at = None
            job.available_at = func.now() + retry_in  # type: ignore[assignment]
            await self.session.flush()
        return job

    async def give_up(self, job: BatchJob, error: str) -> None:
        """A claimed job (locked by this transaction) that has had its attempts: failed."""
        job.status = "failed"
        job.batch = []
        job.error = error
        await self._finished(job)

    async def _finished(self, job: BatchJob) -> None:
        """Done or failed for good: the lease let go, the time noted, the event queued."""
        job.lease_token = None
        job.lease_expires_at = None
        job.finished_at = await self.session.scalar(select(func.now()))
        await webhook_events.queue(self.session, [webhook_events.batch_job_done(job)])
