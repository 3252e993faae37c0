"""Every ingestion query. Each takes the user id, except the worker's claim, which hands out
work across users and then only touches the claimed row."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

from sqlalchemy import Select, and_, bindparam, exists, func, or_, select, text, tuple_, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased

from app.db.models import IngestDecision, IngestTask, Message
from app.ingest.domain import IncomingMessage
from app.ml.embedder import Embedding

OPEN_STATES = ("queued", "running")


def _next_due_task() -> Select[Any]:
    """The claim query, built once: building it per call cost more than running it."""
    task = aliased(IngestTask)
    earlier = aliased(IngestTask)
    busy = aliased(IngestTask)
    now = func.now()
    return (
        select(task)
        .where(
            task.queue == bindparam("queue"),
            task.available_at <= now,
            or_(
                task.state == "queued",
                and_(task.state == "running", task.lease_expires_at < now),
            ),
            ~exists().where(
                earlier.user_id == task.user_id,
                earlier.state.in_(OPEN_STATES),
                tuple_(earlier.sent_at, earlier.message_id) < tuple_(task.sent_at, task.message_id),
            ),
            ~exists().where(
                busy.user_id == task.user_id,
                busy.state == "running",
                busy.lease_expires_at >= now,
                busy.message_id != task.message_id,
            ),
        )
        .order_by(task.available_at)
        .limit(1)
        .with_for_update(skip_locked=True, of=task)
    )


_NEXT_DUE_TASK = _next_due_task()


class IngestRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def insert_message(
        self, user_id: str, message: IncomingMessage, embedding: Embedding
    ) -> uuid.UUID | None:
        """Insert the message; None when its idempotency key is already taken for this user."""
        statement = (
            insert(Message)
            .values(
                id=uuid.uuid4(),
                user_id=user_id,
                session_id=message.session_id,
                speaker=message.speaker,
                role=message.role,
                content=message.content,
                sent_at=message.sent_at,
                utc_offset_minutes=message.utc_offset_minutes,
                embedding_256d=embedding.coarse,
                embedding_768d=embedding.full,
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
            )
        )

    async def get_message(self, user_id: str, message_id: uuid.UUID) -> Message | None:
        return await self.session.scalar(
            select(Message).where(Message.user_id == user_id, Message.id == message_id)
        )

    async def claim_next(self, queue: str, lease: timedelta) -> IngestTask | None:
        """Take the next due task, locking it with SKIP LOCKED so workers never share one.

        Per user, only the earliest open task (by message time) is eligible, and only while no
        other task of that user is being worked on: one user's messages apply in order."""
        claimed = await self.session.scalar(_NEXT_DUE_TASK, {"queue": queue})
        if claimed is None:
            return None
        claimed.state = "running"
        claimed.attempts += 1
        claimed.lease_token = uuid.uuid4()
        claimed.lease_expires_at = await self.session.scalar(select(func.now() + lease))
        await self.session.flush()
        return claimed

    async def renew_lease(self, message_id: uuid.UUID, token: uuid.UUID, lease: timedelta) -> bool:
        """Extend a running task's lease (the worker's heartbeat); False once it is not ours."""
        result = await self.session.execute(
            update(IngestTask)
            .where(
                IngestTask.message_id == message_id,
                IngestTask.lease_token == token,
                IngestTask.state == "running",
            )
            .values(lease_expires_at=func.now() + lease)
        )
        return bool(result.rowcount)  # type: ignore[attr-defined]

    async def lock_owned_task(self, message_id: uuid.UUID, token: uuid.UUID) -> IngestTask | None:
        """Re-lock a task for the final write; None if another worker has taken it over."""
        return await self.session.scalar(
            select(IngestTask)
            .where(
                IngestTask.message_id == message_id,
                IngestTask.lease_token == token,
                IngestTask.state == "running",
            )
            .with_for_update()
            .execution_options(populate_existing=True)
        )

    async def lock_user(self, user_id: str) -> None:
        """Serialise writes of one user's ingestion across workers (transaction-scoped)."""
        await self.session.execute(
            text("SELECT pg_advisory_xact_lock(hashtextextended(:key, 0))"),
            {"key": f"cognis-ingest:{user_id}"},
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
