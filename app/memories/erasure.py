"""Erasing a user: the one path that physically removes rows, in both stores."""

from __future__ import annotations

from dataclasses import dataclass

import structlog
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.config import Settings
from app.memories.fields import check_user_id
from app.memories.repository import MemoryRepository
from app.search_index import outbox
from app.search_index.relay import OutboxRelay

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class Erasure:
    user_id: str
    postgres: dict[str, int]
    # Documents deleted from OpenSearch; None when it could not be reached (the committed
    # outbox event erases them later).
    opensearch_deleted: int | None


class UserEraser:
    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        relay: OutboxRelay,
        settings: Settings,
    ) -> None:
        self._sessionmaker = sessionmaker
        self._relay = relay
        self._settings = settings

    async def erase(self, user_id: str) -> Erasure:
        """Remove every row of the user and queue the OpenSearch erase in one transaction of its
        own, committed before OpenSearch is touched; then run that erase event at once."""
        check_user_id(user_id)
        async with self._sessionmaker() as session, session.begin():
            counts = await MemoryRepository(session).erase_user(user_id)
            event = outbox.enqueue_erase(session, user_id, hold_s=self._settings.erase_handoff_s)
            await session.flush()
            event_id = event.id
        report = await self._relay.run_once(ids=[event_id])
        deleted = report.erased.get(user_id)
        log.info("user.erased", user_id=user_id, postgres=counts, opensearch_deleted=deleted)
        return Erasure(user_id=user_id, postgres=counts, opensearch_deleted=deleted)
