"""The console's read-only queries for what the public API does not list (or a stored
message, which it does not return)."""

from __future__ import annotations

import uuid

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import IngestTask, Message, OutboxEvent


async def recent_job_ids(session: AsyncSession, user_id: str, limit: int) -> list[uuid.UUID]:
    rows = await session.execute(
        select(IngestTask.job_id)
        .where(IngestTask.user_id == user_id)
        .group_by(IngestTask.job_id)
        .order_by(func.max(IngestTask.created_at).desc())
        .limit(limit)
    )
    return [row[0] for row in rows]


async def failing_outbox_events(session: AsyncSession, limit: int) -> list[OutboxEvent]:
    """Undelivered events that have failed at least once, oldest first."""
    rows = await session.scalars(
        select(OutboxEvent)
        .where(OutboxEvent.processed_at.is_(None), OutboxEvent.attempts > 0)
        .order_by(OutboxEvent.id)
        .limit(limit)
    )
    return list(rows)


async def message(session: AsyncSession, user_id: str, message_id: uuid.UUID) -> Message | None:
    """A stored message of the user, as received (a dry run replays it)."""
    return await session.scalar(
        select(Message).where(Message.user_id == user_id, Message.id == message_id)
    )
