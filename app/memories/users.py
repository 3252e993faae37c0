"""The tenant's users: those with memories, with counts and their last change. Read under the
transaction's tenant (row-level security): the API's `GET /v1/users` and the console's list."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import Memory
from app.memories.expiry import unexpired


@dataclass(frozen=True, slots=True)
class UserSummary:
    user_id: str
    current: int
    versions: int
    last_change: datetime


async def users_page(
    session: AsyncSession, after: str | None, limit: int, prefix: str | None = None
) -> list[UserSummary]:
    """Users with memories, by id, `limit` after `after` (keyset paging). Expired memories
    count for nothing: a user whose memories have all expired is not listed."""
    query = (
        select(
            Memory.user_id,
            func.count().filter(Memory.is_current),
            func.count(),
            func.max(func.coalesce(Memory.superseded_at, Memory.created_at)),
        )
        .where(unexpired())
        .group_by(Memory.user_id)
    )
    if after is not None:
        query = query.where(Memory.user_id > after)
    if prefix:
        query = query.where(Memory.user_id.startswith(prefix, autoescape=True))
    rows = await session.execute(query.order_by(Memory.user_id).limit(limit))
    return [UserSummary(*row) for row in rows]
