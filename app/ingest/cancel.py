"""Cancelling a user's messages that are saved but not yet applied: a "delete everything of
this user" (mem0's delete_all) must not be followed by memories from messages that were still
in the queue when it ran."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession

from app.ingest.repository import IngestRepository
from app.memories.user_lock import hold_for_write

CANCELLED = "cancelled: the user's memories were deleted (delete_all) before this was applied"


async def cancel_queued(
    session: AsyncSession, user_id: str, agent_id: str | None = None, run_id: str | None = None
) -> int:
    """In the caller's transaction: the user's messages not yet applied (of `agent_id` /
    `run_id` when named) will never be; how many. Locks as the worker does, in its order (the
    user's write lock, then its ingestion lock), so a batch being written commits first and
    its memories are there for the caller to delete afterwards."""
    await hold_for_write(session, user_id)
    repository = IngestRepository(session)
    await repository.lock_user(None, user_id)  # None: the transaction's tenant
    return await repository.cancel_open(user_id, agent_id, run_id, CANCELLED)
