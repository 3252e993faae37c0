"""Erasing a user: the one path that physically removes rows, in both stores."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import structlog
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.config import Settings
from app.memories.fields import check_user_id
from app.memories.user_lock import ErasedWindow, erase_user
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
    window: ErasedWindow

    @property
    def guarantee(self) -> str:
        """What the receipt promises, in words (docs/architecture.md, "Erasing a user")."""
        return (
            "every write of this user acknowledged before this response is erased from "
            "Postgres, and from OpenSearch once opensearch_pending is false; a write that was "
            "in flight, or that arrives before writes_refused_until, is refused with 409 and "
            "leaves nothing"
        )

    @property
    def erased_at(self) -> datetime:
        return self.window.erased_at


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
            counts, window = await erase_user(session, user_id, self._settings.erase_write_block_s)
            event = outbox.enqueue_erase(session, user_id, hold_s=self._settings.erase_handoff_s)
            await session.flush()
            event_id = event.id
        report = await self._relay.run_once(ids=[event_id])
        deleted = report.erased.get(user_id)
        log.info("user.erased", user_id=user_id, postgres=counts, opensearch_deleted=deleted)
        return Erasure(user_id=user_id, postgres=counts, opensearch_deleted=deleted, window=window)
