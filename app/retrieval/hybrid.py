"""Hybrid search: query embedding, the vector and BM25 legs side by side, weighted RRF.

This is stages 2-4 of the paper's pipeline; the remaining stages build on its plain outputs.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass, field

import structlog
from opensearchpy.exceptions import TransportError
from sqlalchemy.ext.asyncio import AsyncSession

from app.config import Settings
from app.db.models import Memory
from app.memories.repository import MemoryRepository, VectorHit
from app.ml.embedder import Embedder
from app.retrieval.fusion import RankedList, fuse_rrf
from app.search_index.client import UNAVAILABLE, MemoryIndex, TextHit

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class SearchRequest:
    user_id: str
    query: str
    top_k: int
    session_id: str | None = None


@dataclass(slots=True)
class SearchResult:
    memory: Memory
    score: float
    vector_rank: int | None
    vector_score: float | None
    bm25_rank: int | None
    bm25_score: float | None


@dataclass(slots=True)
class SearchResponse:
    results: list[SearchResult]
    missing_legs: list[str] = field(default_factory=list)
    stage_durations_ms: dict[str, float] = field(default_factory=dict)


def _elapsed_ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1000, 3)


class HybridSearch:
    def __init__(self, embedder: Embedder, index: MemoryIndex, settings: Settings) -> None:
        self._embedder = embedder
        self._index = index
        self._settings = settings

    async def _bm25_leg(self, request: SearchRequest) -> tuple[list[TextHit] | None, float]:
        start = time.perf_counter()
        try:
            hits = await self._index.search_bm25(
                request.user_id, request.query, self._settings.bm25_candidates, request.session_id
            )
        except (*UNAVAILABLE, TransportError) as exc:
            log.warning("retrieval.bm25_unavailable", error=str(exc))
            return None, _elapsed_ms(start)
        return hits, _elapsed_ms(start)

    async def search(self, session: AsyncSession, request: SearchRequest) -> SearchResponse:
        durations: dict[str, float] = {}
        start = time.perf_counter()
        embedding = (await self._embedder.embed([request.query]))[0]
        durations["query_embedding_ms"] = _elapsed_ms(start)

        repository = MemoryRepository(session)

        async def vector_leg() -> tuple[list[VectorHit], float]:
            leg_start = time.perf_counter()
            hits = await repository.vector_candidates(
                request.user_id,
                embedding.coarse,
                embedding.full,
                request.session_id,
                self._settings.candidates_256d,
                self._settings.candidates_768d,
                self._settings.hnsw_ef_search,
            )
            return hits, _elapsed_ms(leg_start)

        (vector_hits, vector_ms), (text_hits, bm25_ms) = await asyncio.gather(
            vector_leg(), self._bm25_leg(request)
        )
        durations["vector_ms"] = vector_ms
        durations["bm25_ms"] = bm25_ms

        fuse_start = time.perf_counter()
        lists = [
            RankedList(
                "vector", [h.memory_id for h in vector_hits], self._settings.rrf_weight_vector
            )
        ]
        missing: list[str] = []
        if text_hits is None:
            missing.append("bm25")
        else:
            lists.append(
                RankedList("bm25", [h.memory_id for h in text_hits], self._settings.rrf_weight_bm25)
            )
        fused = fuse_rrf(lists, self._settings.rrf_k)
        durations["rrf_fusion_ms"] = _elapsed_ms(fuse_start)

        load_start = time.perf_counter()
        # BM25 ids are re-read from Postgres with the user filter: the index is never trusted
        # to be the only guard, and a document whose row is gone or superseded is dropped.
        wanted = [uuid.UUID(str(f.id)) for f in fused]
        rows = await repository.get_many(request.user_id, wanted)
        vector_by_id = {h.memory_id: h for h in vector_hits}
        text_by_id = {h.memory_id: h for h in text_hits or []}
        results: list[SearchResult] = []
        for fused_score in fused:
            memory = rows.get(uuid.UUID(str(fused_score.id)))
            if memory is None or not memory.is_current:
                continue
            if memory.scope == "CONTEXT" and memory.session_id != request.session_id:
                continue
            vector_hit = vector_by_id.get(memory.id)
            text_hit = text_by_id.get(memory.id)
            results.append(
                SearchResult(
                    memory=memory,
                    score=fused_score.score,
                    vector_rank=fused_score.ranks.get("vector"),
                    vector_score=vector_hit.score_768d if vector_hit else None,
                    bm25_rank=fused_score.ranks.get("bm25"),
                    bm25_score=text_hit.score if text_hit else None,
                )
            )
            if len(results) == request.top_k:
                break
        durations["load_ms"] = _elapsed_ms(load_start)
        durations["total_ms"] = _elapsed_ms(start)
        log.info(
            "memory_retrieval",
            user_id=request.user_id,
            duration_ms=durations["total_ms"],
            stage_durations=durations,
            candidates_768d=len(vector_hits),
            candidates_bm25=len(text_hits or []),
            results_final=len(results),
            missing_legs=missing,
        )
        return SearchResponse(results=results, missing_legs=missing, stage_durations_ms=durations)
