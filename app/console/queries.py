"""The console's read-only queries for what the public API does not list."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import IngestTask, Memory, OutboxEvent


@dataclass(frozen=True, slots=True)
class UserSummary:
    user_id: str
    current: int
    versions: int
    last_change: datetime


async def users_page(
    session: AsyncSession, after: str | None, limit: int, prefix: str | None = None
) -> list[UserSummary]:
    """Users with memories, by id, `limit` after `after` (keyset paging)."""
    query = select(
        Memory.user_id,
        func.count().filter(Memory.is_current),
        func.count(),
        func.max(func.coalesce(Memory.superseded_at, Memory.created_at)),
    ).group_by(Memory.user_id)
    if after is not None:
        query = query.where(Memory.user_id > after)
    if prefix:
        query = query.where(Memory.user_id.startswith(prefix, autoescape=True))
    rows = await session.execute(query.order_by(Memory.user_id).limit(limit))
    return [UserSummary(*row) for row in rows]


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
