"""Whether the BM25 index holds what Postgres says it should: an index recreated empty, or one
of another cluster missing documents, is noticed, reported and (when empty) refilled.

The outbox's per-user lag says only what is still on its way; an index that lost documents
already delivered (a new cluster, a deleted or restored index) looks fresh to it. So every
COGNIS_INDEX_CHECK_INTERVAL_S the API compares, across tenants, the memory versions Postgres
holds that have no index event still pending (each should have its document) with the index's
document count. Postgres is counted first, then the index refreshed and counted: whatever
happens between the two only adds documents (new writes, deliveries), so the comparison errs
towards "complete". The result is cached: /ready and every search read it, never OpenSearch.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any, Literal

import structlog
from opensearchpy.exceptions import NotFoundError, TransportError
from sqlalchemy import distinct, func, select, text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from app.config import RelaySettings
from app.db.models import Memory, OutboxEvent
from app.db.tenant import tenant_scope
from app.search_index.client import UNAVAILABLE, MemoryIndex
from app.search_index.reindex import requeue_memories
from app.wakeup import sleep_until_woken

log = structlog.get_logger(__name__)

REINDEX_REMEDY = "make reindex (python -m app reindex)"
# One process at a time re-queues an empty index (several API processes check it): a lock of
# a transaction kept open meanwhile. A session lock would not do behind a transaction-mode
# pooler, where its unlock could run on another server connection than the lock.
_REQUEUE_LOCK = text(
    "SELECT pg_try_advisory_xact_lock(hashtextextended('cognis.index_requeue', 0))"
)

CoverageState = Literal["complete", "behind", "unknown"]


@dataclass(frozen=True, slots=True)
class IndexCoverage:
    """One check: `expected` memory versions should have a document (none of their index
    events pending), `documents` are in the index. `requeued`: versions this check re-queued
    for indexing (the index was empty)."""

    state: CoverageState
    documents: int | None = None
    expected: int | None = None
    requeued: int | None = None
    checked_at: float = 0.0  # time.monotonic()

    @property
    def missing(self) -> int | None:
        if self.documents is None or self.expected is None:
            return None
        return max(self.expected - self.documents, 0)


def judge(documents: int, expected: int) -> CoverageState:
    """Behind when fewer documents than versions delivered: a document too many (an event
    deleting it still pending) is no harm to searches, one too few is a memory BM25 misses."""
    return "behind" if documents < expected else "complete"


async def delivered_versions(session: AsyncSession) -> int:
    """Memory versions, every tenant's, whose index events are all delivered: those the index
    should hold. One snapshot; the pending count reads the outbox's partial pending index."""
    versions = select(func.count()).select_from(Memory).scalar_subquery()
    queued = (
        select(func.count(distinct(OutboxEvent.memory_id)))
        .where(OutboxEvent.processed_at.is_(None), OutboxEvent.op == "index")
        .scalar_subquery()
    )
    row = (await session.execute(select(versions, queued))).one()
    return max(int(row[0]) - int(row[1]), 0)


class IndexCoverageCheck:
    """The cached coverage of this process's index (see the module), its periodic check, and
    the re-queue of every memory version when the index is found empty."""

    def __init__(
        self,
        engine: AsyncEngine,
        sessionmaker: async_sessionmaker[AsyncSession],
        index: MemoryIndex,
        relay: RelaySettings,
    ) -> None:
        self._engine = engine
        self._sessionmaker = sessionmaker
        self._index = index
        self.interval_s = relay.index_check_interval_s
        self.requeue_empty = relay.index_requeue_empty
        self.latest: IndexCoverage | None = None  # None: not checked yet (or checks are off)

    @property
    def behind(self) -> bool:
        return self.latest is not None and self.latest.state == "behind"

    async def measure(self) -> IndexCoverage:
        """Count both stores now (no cache, no re-queue)."""
        with tenant_scope(None):  # across tenants: the background role sees every row
            async with self._sessionmaker() as session:
                expected = await delivered_versions(session)
        try:
            # A refresh first: delivered documents count even before the scheduled refresh
            # (or with none, COGNIS_OPENSEARCH_REFRESH_INTERVAL=-1).
            await self._index.refresh()
            documents = int((await self._index.client.count(index=self._index.name))["count"])
        except NotFoundError:
            documents = 0  # no index at all: the relay creates it with its next delivery
        except (*UNAVAILABLE, TransportError) as exc:
            log.warning("search_index.coverage_unknown", error=str(exc)[:300])
            return IndexCoverage("unknown", checked_at=time.monotonic())
        return IndexCoverage(
            judge(documents, expected), documents, expected, checked_at=time.monotonic()
        )

    async def check(self) -> IndexCoverage:
        """Measure, re-queue an empty index when allowed, log a change of state, cache."""
        coverage = await self.measure()
        empty = coverage.state == "behind" and coverage.documents == 0
        if empty and self.requeue_empty:
            coverage = await self._requeue(coverage)
        previous = self.latest
        self.latest = coverage
        if coverage.state == "behind" and coverage.requeued is None:
            if previous is None or previous.state != "behind":
                log.warning(
                    "search_index.behind",
                    index=self._index.name,
                    documents=coverage.documents,
                    expected=coverage.expected,
                    missing=coverage.missing,
                    remedy=REINDEX_REMEDY,
                )
        elif coverage.state == "complete" and previous is not None and previous.state == "behind":
            log.info(
                "search_index.caught_up",
                index=self._index.name,
                documents=coverage.documents,
                expected=coverage.expected,
            )
        return coverage

    async def _requeue(self, found: IndexCoverage) -> IndexCoverage:
        """Queue an index event for every memory version, once: under a lock, and only if the
        index is still found empty (another process may have re-queued it meanwhile)."""
        async with self._engine.begin() as lock:
            if not await lock.scalar(_REQUEUE_LOCK):
                return found  # another process is re-queueing now
            again = await self.measure()
            if again.state != "behind" or again.documents != 0:
                return again
            with tenant_scope(None):
                requeued = await requeue_memories(self._sessionmaker)
        log.warning(
            "search_index.requeued_empty_index",
            index=self._index.name,
            expected=again.expected,
            requeued=requeued,
        )
        return IndexCoverage(
            "behind", again.documents, again.expected, requeued, checked_at=again.checked_at
        )

    async def run_forever(self, stop: asyncio.Event) -> None:
        """Check at once, then every COGNIS_INDEX_CHECK_INTERVAL_S until `stop` (0: never)."""
        if self.interval_s <= 0:
            return
        wake = asyncio.Event()  # nothing wakes it early
        while not stop.is_set():
            try:
                await self.check()
            except Exception as exc:
                log.exception("search_index.coverage_check_failed", error=str(exc))
            await sleep_until_woken(wake, stop, self.interval_s)


def readiness(coverage: IndexCoverage | None) -> dict[str, Any]:
    """/ready's fields for the last check: `index` (complete, behind, unknown: OpenSearch did
    not answer, unchecked: no check yet or checks off), the two counts, and while behind what
    is done about it (`index_remedy`)."""
    if coverage is None:
        return {"index": "unchecked"}
    fields: dict[str, Any] = {
        "index": coverage.state,
        "index_documents": coverage.documents,
        "index_expected": coverage.expected,
        "index_checked_s_ago": round(time.monotonic() - coverage.checked_at, 1),
    }
    if coverage.state == "behind":
        fields["index_remedy"] = (
            REINDEX_REMEDY
            if coverage.requeued is None
            else f"re-queued {coverage.requeued} memory versions: the relay is delivering them "
            "(outbox_pending)"
        )
    return fields
