"""Rebuild the BM25 index from Postgres, the system of record.

Rows are re-queued through the outbox rather than written directly: each gets a fresh event
id (its external version) and is read FOR SHARE, so a write in flight finishes first and the
relay's usual ordering rules keep a newer state from ever being overwritten.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.db.models import Memory
from app.search_index import outbox


async def requeue_memories(
    sessionmaker: async_sessionmaker[AsyncSession],
    user_id: str | None = None,
    batch_size: int = 1000,
    progress: Callable[[int], None] | None = None,
) -> int:
    """Queue an index event for every memory version (of one user, or all). Returns the count."""
    total = 0
    after: uuid.UUID | None = None
    while True:
        async with sessionmaker() as session, session.begin():
            query = select(Memory).order_by(Memory.id).limit(batch_size).with_for_update(read=True)
            if user_id is not None:
                query = query.where(Memory.user_id == user_id)
            if after is not None:
                query = query.where(Memory.id > after)
            rows = list(await session.scalars(query))
            if not rows:
                return total
            outbox.enqueue_index(session, rows, webhooks=False)
            after = rows[-1].id
        total += len(rows)
        if progress is not None:
            progress(total)
