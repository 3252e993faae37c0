"""The 8-stage retrieval pipeline, composed from small stages that pass plain candidates.

1 query analysis · 2 Matryoshka vector search (256D HNSW → exact 768D) · 3 BM25 ·
4 weighted RRF · 5 temporal boost · 6 de-duplication · 7 cross-encoder · 8 history.
Every stage can be switched off per request; each one's duration is measured and logged.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import msgspec
import structlog
from opensearchpy.exceptions import TransportError
from sqlalchemy.ext.asyncio import AsyncSession

from app import metrics
from app.config import Settings
from app.memories.repository import MemoryRepository
from app.ml.cross_encoder import CrossEncoderScorer
from app.ml.embedder import Embedder
from app.retrieval.candidates import Candidate, rank_by_score
from app.retrieval.dedup import dedup_head
from app.retrieval.fusion import RankedList, fuse_rrf
from app.retrieval.history import with_history
from app.retrieval.query_analysis import QueryAnalysis, analyze_query
from app.retrieval.rerank import rerank
from app.retrieval.temporal import apply_temporal_boost
from app.search_index.client import UNAVAILABLE, MemoryIndex, TextHit

log = structlog.get_logger(__name__)


class StageSwitches(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Per-request switches (for ablations and latency-sensitive callers). Also the search
    body's `stages` object: one definition for the API and the pipeline."""

    vector: bool = True
    rescore_768d: bool = True
    bm25: bool = True
    temporal: bool = True
    dedup: bool = True
    rerank: bool = True
    history: bool = True


@dataclass(frozen=True, slots=True)
class SearchRequest:
    user_id: str
    query: str
    top_k: int
    session_id: str | None = None
    as_of: datetime | None = None
    switches: StageSwitches = field(default_factory=StageSwitches)
    rrf_k: int | None = None
    weight_vector: float | None = None
    weight_bm25: float | None = None
    request_id: str | None = None
    # The BM25 index's lag behind Postgres for this user, measured by the caller: logged.
    index_lag: dict[str, Any] | None = None


@dataclass(slots=True)
class SearchResponse:
    results: list[Candidate]
    analysis: QueryAnalysis
    missing_legs: list[str]
    stage_durations_ms: dict[str, float]
    stage_status: dict[str, str]
    duration_ms: float


class _Timer:
    def __init__(self) -> None:
        self.durations: dict[str, float] = {}

    def start(self) -> float:
        return time.perf_counter()

    def stop(self, name: str, started: float) -> None:
        self.durations[name] = round((time.perf_counter() - started) * 1000, 3)


class RetrievalPipeline:
    def __init__(
        self,
        embedder: Embedder,
        index: MemoryIndex,
        settings: Settings,
        cross_encoder: CrossEncoderScorer | None = None,
    ) -> None:
        self._embedder = embedder
        self._index = index
        self._settings = settings
        self._cross_encoder = cross_encoder

    async def _vector_leg(
        self,
        repository: MemoryRepository,
        request: SearchRequest,
        embedding: Any,
        timer: _Timer,
    ) -> tuple[list[Candidate], int]:
        """Stage 2: 256D HNSW shortlist, then exact 768D cosine for every shortlisted one.
        Returns the best candidates and how many the 256D stage shortlisted."""
        settings = self._settings
        started = timer.start()
        coarse = await repository.coarse_candidates(
            request.user_id,
            embedding.coarse,
            request.session_id,
            settings.candidates_256d,
            settings.hnsw_ef_search,
        )
        timer.stop("vector_256d_ms", started)
        candidates = []
        for rank, (memory_id, score) in enumerate(coarse, start=1):
            candidate = Candidate(memory_id=memory_id, score=score)
            candidate.record("256d", rank, score)
            candidates.append(candidate)
        if not request.switches.rescore_768d:
            return candidates[: settings.candidates_768d], len(coarse)
        started = timer.start()
        exact = await repository.exact_768d_scores(
            request.user_id, [c.memory_id for c in candidates], embedding.full
        )
        for candidate in candidates:
            candidate.score = exact.get(candidate.memory_id, -1.0)
        ranked = rank_by_score(candidates, "768d")[: settings.candidates_768d]
        timer.stop("vector_768d_ms", started)
        return ranked, len(coarse)

    async def _bm25_leg(self, request: SearchRequest, timer: _Timer) -> list[TextHit] | None:
        """Stage 3: BM25 from OpenSearch; None when OpenSearch cannot answer."""
        started = timer.start()
        try:
            return await self._index.search_bm25(
                request.user_id, request.query, self._settings.bm25_candidates, request.session_id
            )
        except (*UNAVAILABLE, TransportError) as exc:
            log.warning("retrieval.bm25_unavailable", error=str(exc))
            return None
        finally:
            timer.stop("bm25_ms", started)

    async def search(self, session: AsyncSession, request: SearchRequest) -> SearchResponse:
        settings, switches, timer = self._settings, request.switches, _Timer()
        status: dict[str, str] = {}
        request_started = timer.start()

        started = timer.start()
        analysis = analyze_query(request.query, request.as_of or datetime.now(UTC))
        timer.stop("query_analysis_ms", started)

        repository = MemoryRepository(session)
        vector_hits: list[Candidate] = []
        shortlisted = 0
        text_hits: list[TextHit] | None = []

        async def vector_path() -> tuple[list[Candidate], int]:
            started = timer.start()
            embedding = await self._embedder.embed_query(request.query)
            timer.stop("query_embedding_ms", started)
            return await self._vector_leg(repository, request, embedding, timer)

        # BM25 needs no embedding: it runs while the query is embedded and the vectors are
        # searched. A task group cancels the other leg when one fails.
        try:
            async with asyncio.TaskGroup() as legs:
                vector_task = legs.create_task(vector_path()) if switches.vector else None
                bm25_task = (
                    legs.create_task(self._bm25_leg(request, timer)) if switches.bm25 else None
                )
        except ExceptionGroup as failed:  # the error handlers expect the leg's own exception
            raise failed.exceptions[0] from None
        if vector_task is not None:
            vector_hits, shortlisted = vector_task.result()
        if bm25_task is not None:
            text_hits = bm25_task.result()
        missing = ["bm25"] if text_hits is None else []
        status["vector"] = "on" if switches.vector else "off"
        status["bm25"] = "on" if switches.bm25 else "off"
        if missing:
            status["bm25"] = "unavailable"

        # Stage 4: weighted RRF. An item absent from a list gets nothing from that list.
        started = timer.start()
        by_id = {c.memory_id: c for c in vector_hits}
        for rank, hit in enumerate(text_hits or [], start=1):
            candidate = by_id.setdefault(hit.memory_id, Candidate(memory_id=hit.memory_id))
            # The rank only: a BM25 score carries index-wide term statistics (IDF over every
            # user's documents), so showing it would tell a user whether others store a word.
            # Fusion uses ranks anyway.
            candidate.record("bm25", rank, None)
        fused = fuse_rrf(
            [
                RankedList(
                    "vector",
                    [c.memory_id for c in vector_hits],
                    request.weight_vector
                    if request.weight_vector is not None
                    else settings.rrf_weight_vector,
                ),
                RankedList(
                    "bm25",
                    [h.memory_id for h in text_hits or []],
                    request.weight_bm25
                    if request.weight_bm25 is not None
                    else settings.rrf_weight_bm25,
                ),
            ],
            request.rrf_k if request.rrf_k is not None else settings.rrf_k,
        )
        ranked: list[Candidate] = []
        for position, item in enumerate(fused, start=1):
            candidate = by_id[uuid.UUID(str(item.id))]
            candidate.score = item.score
            candidate.record("rrf", position, item.score)
            ranked.append(candidate)
        timer.stop("rrf_fusion_ms", started)

        # Rows are re-read from Postgres by id *and user*: the index is never the only guard,
        # and a document whose row is gone, superseded or of another session is dropped.
        started = timer.start()
        rows = await repository.visible_current(
            request.user_id, [c.memory_id for c in ranked], request.session_id
        )
        visible = []
        for candidate in ranked:
            memory = rows.get(candidate.memory_id)
            if memory is None:
                continue
            candidate.memory = memory
            visible.append(candidate)
        ranked = visible
        timer.stop("load_ms", started)

        # Stage 5: temporal boost, only for queries with a resolved window.
        if analysis.window is not None and switches.temporal:
            started = timer.start()
            ranked = apply_temporal_boost(
                ranked,
                analysis.window,
                settings.temporal_weight_fused,
                settings.temporal_weight_time,
                settings.temporal_min_score,
            )
            timer.stop("temporal_boost_ms", started)
            status["temporal"] = "applied"
        else:
            status["temporal"] = "off" if not switches.temporal else "no time window in query"

        # Stage 6: de-duplication over the head of the list (what can still be shown).
        if switches.dedup:
            started = timer.start()
            ranked, dropped = await dedup_head(
                ranked,
                request.top_k,
                max(request.top_k * 2, settings.rerank_top_n),
                lambda ids: repository.near_duplicate_pairs(
                    request.user_id, ids, settings.dedup_threshold
                ),
            )
            timer.stop("dedup_ms", started)
            status["dedup"] = f"dropped {len(dropped)}"
        else:
            status["dedup"] = "off"

        # Stage 7: cross-encoder re-ranking, skipped visibly when no model is configured.
        if switches.rerank and self._cross_encoder is not None:
            started = timer.start()
            ranked = await rerank(request.query, ranked, self._cross_encoder, settings.rerank_top_n)
            timer.stop("cross_encoder_ms", started)
            status["rerank"] = "applied"
        else:
            status["rerank"] = (
                "off" if not switches.rerank else "skipped: no cross-encoder configured"
            )

        results = ranked[: request.top_k]
        for position, candidate in enumerate(results, start=1):
            candidate.record("final", position, candidate.score)

        # Stage 8: history, for queries that ask about earlier states.
        if analysis.history and switches.history and results:
            started = timer.start()
            earlier = await repository.superseded_versions(
                request.user_id,
                list({c.memory.chain_id for c in results if c.memory}),
                request.session_id,
            )
            results = with_history(results, earlier, settings.history_max_versions)
            timer.stop("version_chain_ms", started)
            status["history"] = "applied"
        else:
            status["history"] = "off" if not switches.history else "no history intent"

        total_ms = round((time.perf_counter() - request_started) * 1000, 3)
        log.info(
            "memory_retrieval",
            request_id=request.request_id,
            user_id=request.user_id,
            duration_ms=total_ms,
            stage_durations=timer.durations,
            candidates_256d=shortlisted,
            candidates_768d=len(vector_hits),
            candidates_bm25=len(text_hits or []),
            results_final=len(results),
            temporal_query=analysis.temporal,
            history_query=analysis.history,
            missing_legs=missing,
            stages=status,
            index_lag=request.index_lag,
        )
        metrics.observe(timer.durations, total_ms, missing)
        return SearchResponse(
            results=results,
            analysis=analysis,
            missing_legs=missing,
            stage_durations_ms=timer.durations,
            stage_status=status,
            duration_ms=total_ms,
        )
