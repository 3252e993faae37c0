"""Every ingestion query. Each takes the user id, except the worker's claim, which hands out
work across tenants and users and then only touches the claimed rows."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, select, text, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import IngestDecision, IngestTask, Message
from app.ingest.backlog import WINDOW_S, Backlog
from app.ingest.domain import IncomingMessage
from app.ingest.due_tasks import NEXT_DUE_HEADS, USER_OPEN_TASKS_AFTER
from app.memories.user_lock import lock_user_row
from app.ml.embedder import Embedding


@dataclass(frozen=True, slots=True)
class ClaimedTask:
    """What the worker keeps of a claimed task (plain data: no ORM row to expire)."""

    message_id: uuid.UUID
    job_id: uuid.UUID
    scope: str | None
    attempts: int
    # The W3C traceparent of the request that queued it (tracing on then): its spans continue
    # that trace.
    traceparent: str | None = None
    # When it was queued: a task held up by an outage waits until it is this old plus
    # COGNIS_INGEST_OUTAGE_MAX_AGE_S (None: no limit known).
    queued_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class Claim:
    """One user's due tasks, in apply order, leased together under one token."""

    tenant_id: uuid.UUID
    user_id: str
    token: uuid.UUID
    tasks: list[ClaimedTask]

    @property
    def message_ids(self) -> list[uuid.UUID]:
        return [t.message_id for t in self.tasks]


class IngestRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def insert_message(self, user_id: str, message: IncomingMessage) -> uuid.UUID | None:
        """Insert the message (without vectors: the worker embeds it); None when its
        idempotency key is already taken for this user."""
        statement = (
            insert(Message)
            .values(
                id=uuid.uuid4(),
                user_id=user_id,
                session_id=message.session_id,
                agent_id=message.agent_id,
                run_id=message.run_id,
                speaker=message.speaker,
                role=message.role,
                content=message.content,
                sent_at=message.sent_at,
                utc_offset_minutes=message.utc_offset_minutes,
                metadata=message.metadata,
                idempotency_key=message.idempotency_key,
            )
            .on_conflict_do_nothing(
                index_elements=["tenant_id", "user_id", "idempotency_key"],
                index_where=text("idempotency_key IS NOT NULL"),
            )
            .returning(Message.id)
        )
        return await self.session.scalar(statement)

    async def message_by_key(self, user_id: str, key: str) -> tuple[uuid.UUID, uuid.UUID] | None:
        """(message id, job id) of the message stored under this idempotency key."""
        row = (
            await self.session.execute(
                select(Message.id, IngestTask.job_id)
                .join(IngestTask, IngestTask.message_id == Message.id)
                .where(Message.user_id == user_id, Message.idempotency_key == key)
            )
        ).first()
        return (row[0], row[1]) if row else None

    def add_task(
        self,
        user_id: str,
        message_id: uuid.UUID,
        job_id: uuid.UUID,
        message: IncomingMessage,
        queue: str,
        settle: timedelta,
        traceparent: str | None = None,
    ) -> None:
        self.session.add(
            IngestTask(
                message_id=message_id,
                job_id=job_id,
                user_id=user_id,
                queue=queue,
                sent_at=message.sent_at,
                scope=message.scope,
                available_at=func.now() + settle,
                traceparent=traceparent,
            )
        )

    async def store_embeddings(self, user_id: str, embeddings: dict[uuid.UUID, Embedding]) -> None:
        """Keep the vectors the worker computed on the message rows that had none, so a task
        retried, or a row read later, never needs the model for that text again."""
        for message_id, embedding in embeddings.items():
            await self.session.execute(
                update(Message)
                .where(
                    Message.user_id == user_id,
                    Message.id == message_id,
                    Message.embedding_768d.is_(None),
                )
                .values(embedding_768d=embedding.full, embedding_256d=embedding.coarse)
            )

    async def get_messages(
        self, user_ids: list[str], message_ids: list[uuid.UUID]
    ) -> dict[uuid.UUID, Message]:
        """The messages of these users (a claim's) by id, in one query."""
        rows = await self.session.scalars(
            select(Message).where(Message.user_id.in_(user_ids), Message.id.in_(message_ids))
        )
        return {m.id: m for m in rows}

    async def claim(
        self,
        queue: str,
        lease: timedelta,
        max_tasks: int,
        after_tenant: uuid.UUID | None,
        max_users: int = 1,
    ) -> list[Claim]:
        """Take the next due users' head tasks (at most `max_users` users, all of the tenant
        whose turn it is) and each user's due tasks after its head (at most `max_tasks` in
        all, each user keeping at least its head), leased together under one token; heads are
        locked with SKIP LOCKED, so workers never share a user. Empty when nothing is due."""
        heads = list(
            await self.session.scalars(
                NEXT_DUE_HEADS,
                {"queue": queue, "after_tenant": after_tenant, "heads": max(1, max_users)},
            )
        )
        if not heads:
            return []
        # One tenant per claim: its texts go to the model as that tenant's work, and the
        # tenants still take turns, claim by claim. The other tenants' heads are left (their
        # row locks end with this transaction).
        heads = [h for h in heads if h.tenant_id == heads[0].tenant_id]
        room = max(max_tasks, len(heads)) - len(heads)
        batches: list[list[IngestTask]] = []
        for head in heads:
            batch = [head]
            if room > 0:
                batch += await self._due_after(head, queue, room)
                room -= len(batch) - 1
            batches.append(batch)
        token = uuid.uuid4()
        expires = await self.session.scalar(select(func.now() + lease))
        for task in (t for batch in batches for t in batch):
            task.state = "running"
            task.attempts += 1
            task.lease_token = token
            task.lease_expires_at = expires
        await self.session.flush()
        return [
            Claim(
                tenant_id=batch[0].tenant_id,
                user_id=batch[0].user_id,
                token=token,
                tasks=[
                    ClaimedTask(
                        t.message_id, t.job_id, t.scope, t.attempts, t.traceparent, t.created_at
                    )
                    for t in batch
                ],
            )
            for batch in batches
        ]

    async def _due_after(self, head: IngestTask, queue: str, limit: int) -> list[IngestTask]:
        """The head's user's due tasks after it, in apply order, up to the first that may not
        run yet (other queue, backing off, leased): taking a later one would apply it before an
        earlier one."""
        following = await self.session.execute(
            USER_OPEN_TASKS_AFTER,
            {
                "tenant_id": head.tenant_id,
                "user_id": head.user_id,
                "message_id": head.message_id,
                "limit": limit,
            },
        )
        due = []
        for task, now in following:
            if not _due(task, queue, now):
                break
            due.append(task)
        return due

    async def renew_lease(self, token: uuid.UUID, lease: timedelta) -> bool:
        """Extend a claim's lease (the worker's heartbeat); False once it is not ours."""
        # Rows locked in apply order, as the claim and the final write lock them.
        owned = (
            select(IngestTask.message_id)
            .where(IngestTask.lease_token == token, IngestTask.state == "running")
            .order_by(IngestTask.sent_at, IngestTask.message_id)
            .with_for_update()
        )
        result = await self.session.execute(
            update(IngestTask)
            .where(IngestTask.message_id.in_(owned.scalar_subquery()))
            .values(lease_expires_at=func.now() + lease)
        )
        return bool(result.rowcount)  # type: ignore[attr-defined]

    async def lock_owned_tasks(self, token: uuid.UUID, user_id: str) -> set[uuid.UUID]:
        """Re-lock a user's claimed tasks for the final write (in apply order, as the claim
        did); the ids still ours: one missing was taken over by another worker."""
        rows = await self.session.scalars(
            select(IngestTask.message_id)
            .where(
                IngestTask.lease_token == token,
                IngestTask.user_id == user_id,
                IngestTask.state == "running",
            )
            .order_by(IngestTask.sent_at, IngestTask.message_id)
            .with_for_update()
        )
        return set(rows)

    async def lock_user(self, tenant_id: uuid.UUID | None, user_id: str) -> None:
        """Serialise writes of one user's ingestion across workers (transaction-scoped): the
        user's row of user_locks FOR NO KEY UPDATE, so the user's request writes (FOR KEY
        SHARE) go on beside it, an erase waits, and no reader can take it (`tenant_id` None:
        the transaction's tenant)."""
        await lock_user_row(self.session, tenant_id, user_id, "NO KEY UPDATE")

    async def finish_tasks(self, message_ids: list[uuid.UUID], token: uuid.UUID) -> None:
        if not message_ids:
            return
        await self.session.execute(
            update(IngestTask)
            .where(IngestTask.message_id.in_(message_ids), IngestTask.lease_token == token)
            .values(state="done", finished_at=func.now(), lease_token=None, last_error=None)
        )

    async def release_task(
        self, message_id: uuid.UUID, token: uuid.UUID, error: str, retry_in: timedelta, final: bool
    ) -> None:
        """Give a failed task back for a later attempt, or mark it failed for good."""
        values: dict[str, Any] = {"last_error": error[:2000], "lease_token": None}
        if final:
            values.update(state="failed", finished_at=func.now())
        else:
            values.update(state="queued", available_at=func.now() + retry_in)
        await self.session.execute(
            update(IngestTask)
            .where(IngestTask.message_id == message_id, IngestTask.lease_token == token)
            .values(**values)
        )

    async def backlog(self, queue: str) -> Backlog:
        """The queue's open tasks, the oldest one's wait and the tasks applied within the last
        WINDOW_S seconds, as this session's tenant sees them (app/ingest/backlog.py)."""
        open_ = IngestTask.state.in_(("queued", "running"))
        row = (
            await self.session.execute(
                select(
                    func.count().filter(open_),
                    func.extract(
                        "epoch", func.now() - func.min(IngestTask.created_at).filter(open_)
                    ),
                    func.count().filter(
                        IngestTask.state == "done",
                        IngestTask.finished_at > func.now() - timedelta(seconds=WINDOW_S),
                    ),
                ).where(
                    IngestTask.queue == queue,
                    open_
                    | (
                        IngestTask.state.in_(("done", "failed"))
                        & (IngestTask.finished_at > func.now() - timedelta(seconds=WINDOW_S))
                    ),
                )
            )
        ).one()
        return Backlog(
            open=int(row[0]), oldest_s=max(0.0, float(row[1] or 0.0)), applied=int(row[2])
        )

    async def postpone_task(
        self, message_id: uuid.UUID, token: uuid.UUID, error: str, retry_in: timedelta
    ) -> None:
        """Give back a task that failed because a dependency was unavailable (an outage, not
        the message's fault): queued again after `retry_in`, its attempt not counted."""
        await self.session.execute(
            update(IngestTask)
            .where(IngestTask.message_id == message_id, IngestTask.lease_token == token)
            .values(
                state="queued",
                attempts=IngestTask.attempts - 1,
                available_at=func.now() + retry_in,
                lease_token=None,
                last_error=error[:2000],
            )
        )

    async def requeue_failed(self, queue: str | None = None, user_id: str | None = None) -> int:
        """Failed tasks (of one queue, one user, or all) queued again as if just accepted: no
        attempt spent, the outage age counted from now; how many."""
        statement = (
            update(IngestTask)
            .where(IngestTask.state == "failed")
            .values(
                state="queued",
                attempts=0,
                available_at=func.now(),
                created_at=func.now(),
                finished_at=None,
                lease_token=None,
            )
        )
        if queue is not None:
            statement = statement.where(IngestTask.queue == queue)
        if user_id is not None:
            statement = statement.where(IngestTask.user_id == user_id)
        result = await self.session.execute(statement.returning(IngestTask.message_id))
        return len(result.all())

    async def return_unstarted(self, message_ids: list[uuid.UUID], token: uuid.UUID) -> None:
        """Hand back claimed tasks that were not attempted (an earlier one of the batch will be
        retried first): queued again, their attempt not counted."""
        if not message_ids:
            return
        await self.session.execute(
            update(IngestTask)
            .where(IngestTask.message_id.in_(message_ids), IngestTask.lease_token == token)
            .values(state="queued", attempts=IngestTask.attempts - 1, lease_token=None)
        )

    async def cancel_open(
        self, user_id: str, agent_id: str | None, run_id: str | None, reason: str
    ) -> int:
        """Mark failed, with `reason`, the user's tasks not yet applied (queued, or claimed by a
        worker that has not committed them), only those of messages of `agent_id` / `run_id`
        when named; how many. A worker holding one finds it no longer its own when it commits
        (lock_owned_tasks) and rolls its batch back, so none of them becomes a memory. The
        caller holds the user's ingestion lock (lock_user) first: a batch already being
        written is then committed before this runs, and its memories are there to delete."""
        of_messages = select(Message.id).where(Message.user_id == user_id)
        if agent_id is not None:
            of_messages = of_messages.where(Message.agent_id == agent_id)
        if run_id is not None:
            of_messages = of_messages.where(Message.run_id == run_id)
        result = await self.session.execute(
            update(IngestTask)
            .where(
                IngestTask.user_id == user_id,
                IngestTask.state.in_(("queued", "running")),
                IngestTask.message_id.in_(of_messages),
            )
            .values(
                state="failed",
                finished_at=func.now(),
                lease_token=None,
                last_error=reason[:2000],
            )
        )
        return int(result.rowcount)  # type: ignore[attr-defined]

    async def move_user_to_back(self, user_id: str) -> None:
        """After a batch: the user's next task counts as due from now, so the claim's "oldest
        head first" serves the tenant's other users before this user's backlog again."""
        head = (
            select(IngestTask.message_id)
            .where(IngestTask.user_id == user_id, IngestTask.state == "queued")
            .order_by(IngestTask.sent_at, IngestTask.message_id)
            .limit(1)
            .scalar_subquery()
        )
        await self.session.execute(
            update(IngestTask)
            .where(IngestTask.message_id == head)
            .values(available_at=func.greatest(IngestTask.available_at, func.now()))
        )

    def add_decisions(self, decisions: list[IngestDecision]) -> None:
        self.session.add_all(decisions)

    async def job_tasks(self, user_id: str, job_id: uuid.UUID) -> list[IngestTask]:
        rows = await self.session.scalars(
            select(IngestTask)
            .where(IngestTask.user_id == user_id, IngestTask.job_id == job_id)
            .order_by(IngestTask.sent_at, IngestTask.message_id)
        )
        return list(rows)

    async def job_decisions(self, user_id: str, job_id: uuid.UUID) -> list[IngestDecision]:
        rows = await self.session.scalars(
            select(IngestDecision)
            .where(IngestDecision.user_id == user_id, IngestDecision.job_id == job_id)
            .order_by(IngestDecision.message_id, IngestDecision.position)
        )
        return list(rows)


def _due(task: IngestTask, queue: str, now: datetime) -> bool:
    """Whether a task may be taken now (the head query's conditions, for one row)."""
    if task.queue != queue or task.available_at > now:
        return False
    return task.state == "queued" or (
        task.lease_expires_at is not None and task.lease_expires_at < now
    )
