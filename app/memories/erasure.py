"""Erasing a user, or one agent's or run's part of a user: the paths that physically remove
rows (besides the expiry reaper), in both stores."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import structlog
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.config import Settings
from app.memories.fields import check_scope_id, check_user_id
from app.memories.user_lock import ErasedWindow, erase_scope, erase_user
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
    # A scoped erase's agent and/or run; both None: the whole user.
    agent_id: str | None = None
    run_id: str | None = None

    @property
    def guarantee(self) -> str:
        """What the receipt promises, in words (docs/architecture.md, "Erasing a user")."""
        if self.agent_id is not None or self.run_id is not None:
            return (
                "every memory (all its versions) and message of this agent or run whose write "
                "committed before erased_at is erased from Postgres, and from OpenSearch once "
                "opensearch_pending is false; the user's shared memories and other agents' and "
                "runs' stay; no write is refused: one committed after erased_at is kept"
            )
        return (
            "every write of this user that began before erased_at is erased from Postgres, "
            "and from OpenSearch once opensearch_pending is false, or, if it was still in "
            "flight, refused with 409 and leaves nothing; a write that began after erased_at, "
            "so any write sent after this response, is accepted"
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
            counts, window = await erase_user(session, user_id, self._settings.erase_tombstone_s)
            event = outbox.enqueue_erase(session, user_id, hold_s=self._settings.erase_handoff_s)
            await session.flush()
            event_id = event.id
        report = await self._relay.run_once(ids=[event_id])
        deleted = report.erased.get(user_id)
        log.info("user.erased", user_id=user_id, postgres=counts, opensearch_deleted=deleted)
        return Erasure(user_id=user_id, postgres=counts, opensearch_deleted=deleted, window=window)

    async def erase_scope(self, user_id: str, agent_id: str | None, run_id: str | None) -> Erasure:
        """Remove one agent's and/or one run's memories and messages of the user, queue their
        documents' deletions and write the audit row in one transaction; then deliver those
        deletions at once. No tombstone: the user's other writes wait for the transaction (the
        user's lock), none is refused after it (docs/architecture.md, "Erasing an agent or a
        run")."""
        check_user_id(user_id)
        agent_id = check_scope_id(agent_id, "agent_id")
        run_id = check_scope_id(run_id, "run_id")
        async with self._sessionmaker() as session, session.begin():
            erased = await erase_scope(
                session, user_id, agent_id, run_id, self._settings.erase_handoff_s
            )
        events = erased.delete_events
        batch = max(self._settings.relay_batch_size, 1)
        delivered = 0
        for start in range(0, len(events), batch):
            delivered += (await self._relay.run_once(ids=events[start : start + batch])).delivered
        deleted = delivered if delivered == len(events) else None
        # Like `user.erased`: ids and counts, never content.
        log.info(
            "user.scope_erased",
            user_id=user_id,
            agent_id=agent_id,
            run_id=run_id,
            memories=erased.memories,
            postgres=erased.counts,
            opensearch_deleted=deleted,
        )
        return Erasure(
            user_id=user_id,
            postgres=erased.counts,
            opensearch_deleted=deleted,
            window=ErasedWindow(erased_at=erased.erased_at, tombstone_until=None),
            agent_id=agent_id,
            run_id=run_id,
        )
