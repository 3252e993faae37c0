"""One search as every surface answers it (REST search, mem0's search): the index wait the
request's consistency asks for, the pipeline on the replica or the writer, and how far the BM25
index was behind Postgres for this user. The API parses the request and puts the outcome on the
wire; everything between is here."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Literal

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.db.reads import ReadRoute, ReadRouter
from app.retrieval.pipeline import RetrievalPipeline
from app.retrieval.request import SearchRequest, SearchResponse
from app.search_index.client import MemoryIndex
from app.search_index.coverage import IndexCoverageCheck
from app.search_index.freshness import IndexWait, index_lag, wait_until_indexed
from app.search_index.relay import OutboxRelay

# "indexed": the search sees every write acknowledged before it, in both legs.
Consistency = Literal["eventual", "indexed"]


@dataclass(frozen=True, slots=True)
class IndexFreshness:
    """How far the BM25 index was behind Postgres for the user when the search ran."""

    pending: int
    unrefreshed: int
    oldest_pending_age_ms: float | None
    # Whether the results may miss or misjudge a write acknowledged before the search.
    stale: bool
    waited_ms: float | None  # the index wait `indexed` asked for, when it ran


@dataclass(frozen=True, slots=True)
class SearchOutcome:
    response: SearchResponse
    freshness: IndexFreshness
    route: ReadRoute  # where it ran: the writer, or the replica and how long it waited


@dataclass(frozen=True, slots=True)
class SearchService:
    pipeline: RetrievalPipeline
    sessionmaker: async_sessionmaker[AsyncSession]
    relay: OutboxRelay
    index: MemoryIndex
    coverage: IndexCoverageCheck
    router: ReadRouter

    async def search(
        self, request: SearchRequest, *, consistency: Consistency, wait_timeout_s: float
    ) -> SearchOutcome:
        """`indexed` waits (at most `wait_timeout_s`) until the user's writes are in the index,
        and reads Postgres where it has them too: on a replica, once it replayed them."""
        bm25 = request.switches.bm25
        waited: IndexWait | None = None
        # Waiting only matters to the BM25 leg: the vector leg reads Postgres itself.
        if consistency == "indexed" and bm25:
            waited = await wait_until_indexed(
                self.sessionmaker, self.relay, request.user_id, wait_timeout_s
            )

        async def search_on(session: AsyncSession) -> tuple[IndexFreshness, SearchResponse]:
            lag = await index_lag(session, self.index, request.user_id, waited)
            freshness = IndexFreshness(
                pending=lag.pending,
                unrefreshed=lag.unrefreshed,
                oldest_pending_age_ms=lag.oldest_pending_age_ms,
                # After a wait, events written since the request began do not make it stale;
                # without the BM25 leg nothing was read from the index. An index found behind
                # Postgres (app/search_index/coverage.py) may miss any of them.
                stale=bm25
                and (
                    self.coverage.behind
                    or ((not waited.indexed) if waited is not None else lag.pending > 0)
                ),
                waited_ms=waited.waited_ms if waited is not None else None,
            )
            logged = replace(request, index_lag={**asdict(freshness), "consistency": consistency})
            return freshness, await self.pipeline.search(session, logged)

        (freshness, response), route = await self.router.read(
            search_on, fresh=consistency == "indexed"
        )
        if not route.caught_up:  # a replica that may miss this user's writes, in either leg
            freshness = replace(freshness, stale=True)
        return SearchOutcome(response, freshness, route)
