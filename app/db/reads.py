"""Where a read runs: on the read replica (COGNIS_READ_DATABASE_URL: Aurora's reader endpoint, a
streaming replica) when one is configured, answering, and caught up as far as the read needs;
otherwise on the writer.

A read that must see the writes committed before it began ("fresh": read-your-writes) takes the
writer's current WAL position (`pg_current_wal_lsn()`) and waits, bounded by
COGNIS_REPLICA_WAIT_MAX_MS, until the replica has replayed it (`pg_last_wal_replay_lsn()`);
past that bound the writer serves it. Any other read on the replica ("eventual") does not wait,
but it is told whether the replica had replayed the writer's position when it began
(`ReadRoute.caught_up`): if not, the read may miss writes committed before it, the caller's own
among them, and a search says so (`stale`). A replica that does not answer (refused, dropped,
killed) or cancels a query for a conflict with recovery is rested for COGNIS_REPLICA_RETRY_S:
the read in hand is run again on the writer (reads repeat safely) and the next ones go there at
once.
Every read says where it ran (`ReadRoute`), which the API reports in its response headers.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal, TypeVar

import asyncpg.exceptions as pg
import structlog
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.outages import POSTGRES, causes, unavailable_store

log = structlog.get_logger(__name__)

T = TypeVar("T")
ReadSource = Literal["replica", "writer"]
# Why the writer served a read meant for the replica.
Fallback = Literal["replica_behind", "replica_unavailable", "replica_position_unknown"]

_WRITER_POSITION = text("SELECT pg_current_wal_lsn()::text")
# NULL on a server that is not replaying WAL (no standby: the position cannot be checked).
_REPLAYED = text(
    "SELECT CASE WHEN pg_last_wal_replay_lsn() IS NULL THEN NULL "
    "ELSE pg_last_wal_replay_lsn() >= CAST(CAST(:target AS text) AS pg_lsn) END"
)
_FIRST_POLL_S = 0.002
_LONGEST_POLL_S = 0.025


@dataclass(frozen=True)
class ReadRoute:
    source: ReadSource
    # Time spent waiting for the replica to replay the writer's position (fresh reads).
    waited_ms: float = 0.0
    fallback: Fallback | None = None
    # Whether the database had every write committed before the read began: the writer always;
    # a replica once it replayed the writer's position then (None: it reports no position).
    caught_up: bool | None = True


WRITER = ReadRoute("writer")


def _replica_failed(exc: BaseException) -> bool:
    """The replica cannot serve this read, though the writer could: it does not answer, or a
    query was cancelled because it conflicted with WAL replay (SQLSTATE 40001 on a standby;
    a read at read committed has no other serialization failure)."""
    if unavailable_store(exc) == POSTGRES:
        return True
    return any(isinstance(error, pg.SerializationError) for error in causes(exc))


class ReadRouter:
    """The writer's sessions, and the replica's when one is configured (see the module)."""

    def __init__(
        self,
        writer: async_sessionmaker[AsyncSession],
        replica: async_sessionmaker[AsyncSession] | None,
        *,
        wait_max_s: float,
        retry_s: float,
    ) -> None:
        self.writer = writer
        self.replica = replica
        self.wait_max_s = wait_max_s
        self.retry_s = retry_s
        self._rested_until = 0.0

    @property
    def has_replica(self) -> bool:
        return self.replica is not None

    async def read(
        self, work: Callable[[AsyncSession], Awaitable[T]], *, fresh: bool
    ) -> tuple[T, ReadRoute]:
        """Run `work` on a session of the replica or of the writer; see the module."""
        if self.replica is None:
            return await self._on_writer(work, WRITER)
        if self._resting():
            return await self._on_writer(work, ReadRoute("writer", fallback="replica_unavailable"))
        # The writer's own failure is the writer's: it is raised, not a reason to rest the replica.
        # An eventual read asks for the position too (one short query): not to wait for it, but
        # to say whether the replica may miss writes committed before the read. Without the
        # writer it cannot tell (None), and it reads the replica all the same.
        target: str | None = None
        try:
            target = await self._writer_position()
        except Exception as exc:
            if fresh or unavailable_store(exc) != POSTGRES:
                raise
        started = time.monotonic()
        try:
            async with self.replica() as session:
                if not fresh:
                    replayed = await self._replayed(session, target) if target else None
                    return await work(session), ReadRoute("replica", caught_up=replayed)
                assert target is not None
                caught_up = await self._wait_for(session, target)
                waited_ms = (time.monotonic() - started) * 1000
                if caught_up:
                    return await work(session), ReadRoute("replica", waited_ms)
        except Exception as exc:
            if not _replica_failed(exc):
                raise
            self._rest(exc)
            waited_ms = (time.monotonic() - started) * 1000
            return await self._on_writer(
                work, ReadRoute("writer", waited_ms, "replica_unavailable")
            )
        reason: Fallback = "replica_behind" if caught_up is False else "replica_position_unknown"
        return await self._on_writer(work, ReadRoute("writer", waited_ms, reason))

    async def sessionmaker_for(self, *, fresh: bool) -> tuple[async_sessionmaker, ReadRoute]:
        """For a read that opens its own sessions later (a streamed export): where it should
        run, decided now (the replica answering and, if `fresh`, caught up)."""
        if self.replica is None:  # nothing to decide: no round trip
            return self.writer, WRITER

        async def nothing(session: AsyncSession) -> None:
            await session.execute(text("SELECT 1"))

        _, route = await self.read(nothing, fresh=fresh)
        chosen = self.replica if route.source == "replica" else self.writer
        assert chosen is not None
        return chosen, route

    async def _on_writer(
        self, work: Callable[[AsyncSession], Awaitable[T]], route: ReadRoute
    ) -> tuple[T, ReadRoute]:
        async with self.writer() as session:
            return await work(session), route

    async def _writer_position(self) -> str:
        async with self.writer() as session:
            return str((await session.execute(_WRITER_POSITION)).scalar_one())

    async def _wait_for(self, session: AsyncSession, target: str) -> bool | None:
        """True once the replica has replayed `target`; False if the bound passes first; None
        when the server cannot say (it is not replaying WAL)."""
        deadline = time.monotonic() + self.wait_max_s
        pause = _FIRST_POLL_S
        while True:
            replayed = await self._replayed(session, target)
            if replayed is None or replayed:
                return replayed
            if time.monotonic() + pause > deadline:
                return False
            await asyncio.sleep(pause)
            pause = min(pause * 2, _LONGEST_POLL_S)

    @staticmethod
    async def _replayed(session: AsyncSession, target: str) -> bool | None:
        """Whether the replica has replayed `target` now (None: it reports no position)."""
        replayed: bool | None = (await session.execute(_REPLAYED, {"target": target})).scalar_one()
        # Each check is its own snapshot: end the transaction so the next one sees further.
        await session.rollback()
        return replayed

    def _resting(self) -> bool:
        return time.monotonic() < self._rested_until

    def _rest(self, exc: BaseException) -> None:
        self._rested_until = time.monotonic() + self.retry_s
        log.warning(
            "reads.replica_rested",
            error=f"{type(exc).__name__}: {exc}"[:300],
            retry_s=self.retry_s,
        )
