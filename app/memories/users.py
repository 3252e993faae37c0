"""The tenant's users: those with memories, with counts and their last change. Read under the
transaction's tenant (row-level security): the API's `GET /v1/users` and the console's list."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import Memory
from app.errors import InvalidInputError
from app.memories.cursors import decode_cursor, encode_cursor, invalid_cursor
from app.memories.expiry import unexpired
from app.memories.fields import check_user_id

# A users page's cursor names its kind, so a memory list's cursor is refused here.
_USERS_CURSOR = "users"


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


def users_cursor(last: UserSummary) -> str:
    """The cursor of the page after `last`."""
    return encode_cursor(_USERS_CURSOR, last.user_id)


def users_after(cursor: str) -> str:
    """The user id a `users_cursor` leads on from, or an InvalidInputError for any other text."""
    kind, user_id = decode_cursor(cursor, 2)
    try:
        check_user_id(user_id)
    except InvalidInputError:
        raise invalid_cursor() from None
    if kind != _USERS_CURSOR:
        raise invalid_cursor()
    return user_id
