"""Read-your-writes over the outbox: how stale a user's BM25 index is, and waiting it out.

Postgres commits first; OpenSearch follows through the outbox, and a delivered document is
searchable only after the index's next refresh. A caller that must see its own writes in the
BM25 leg asks to wait, bounded, until its user's pending events are delivered and searchable.
The wait reads the outbox, so it works whichever process relays.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.search_index import outbox
from app.search_index.client import MemoryIndex
from app.search_index.relay import OutboxRelay


@dataclass(frozen=True, slots=True)
class IndexWait:
    """Outcome of a bounded wait: how long it took, and whether everything got indexed."""

    waited_ms: float
    indexed: bool


async def wait_until_indexed(
    sessionmaker: async_sessionmaker[AsyncSession],
    relay: OutboxRelay,
    user_id: str,
    timeout_s: float,
    memory_ids: list[uuid.UUID] | None = None,
) -> IndexWait:
    """Wait until the user's events pending now (only those of `memory_ids`, if given) are
    in OpenSearch and searchable, or `timeout_s` passes. Later writes are not waited for."""
    started = time.perf_counter()
    async with sessionmaker() as session:
        ids = await outbox.user_pending_ids(session, user_id, memory_ids)
    # Even with nothing pending, a refresh: an event delivered a moment ago may not be
    # searchable before the index's next scheduled refresh.
    indexed = await relay.deliver_now(ids, timeout_s)
    return IndexWait(waited_ms=round((time.perf_counter() - started) * 1000, 3), indexed=indexed)


async def index_lag(
    session: AsyncSession, index: MemoryIndex, user_id: str, waited: IndexWait | None
) -> outbox.IndexLag:
    """The user's events not yet searchable: undelivered, or delivered within the index's
    refresh window. After a wait that ended in a refresh, what it delivered is searchable:
    only events delivered later (none from before the request) could still be unrefreshed."""
    window = 0.0 if waited is not None and waited.indexed else index.refresh_window_s
    return await outbox.user_index_lag(session, user_id, window)
