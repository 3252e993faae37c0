"""The 8-stage retrieval pipeline, composed from small stages that pass plain candidates.

1 query analysis · [speaker-free query text] · 2 Matryoshka vector search (256D exact for a
small user, else HNSW → exact 768D [→ feedback]) · 3 BM25 [+ proximity] · 4 weighted RRF
[balanced or typed weights] · load and visibility · [speaker · entities · neighbours ·
time mentions] · 5 temporal boost · 6 de-duplication · 7 cross-encoder · 8 history.
The bracketed steps and the context legs are levers (app/retrieval/profiles.py): `paper` runs
SPEC's 8 stages exactly, `default` the levers that earned their place. Every stage can be
switched off per request; each one's duration is measured and logged.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import msgspec
import structlog
from sqlalchemy.ext.asyncio import AsyncSession

from app import metrics
from app.config import Settings
from app.db.tenant import current_tenant
from app.memories.repository import MemoryRepository
from app.ml.cross_encoder import CrossEncoderScorer
from app.ml.embedder import Embedder
from app.retrieval.bm25_leg import Bm25LegSettings, bm25_leg
from app.retrieval.candidates import Candidate
from app.retrieval.dedup import dedup_head
from app.retrieval.entities import boost_shared_entities, names_something
from app.retrieval.fusion import fuse_legs, fuse_scores, leg_weights
from app.retrieval.history import with_history
from app.retrieval.neighbours import links, spread_to_neighbours
from app.retrieval.profiles import Levers
from app.retrieval.query_analysis import QueryAnalysis, analyze_query
from app.retrieval.rerank import rerank
from app.retrieval.speakers import boost_named_speakers, known_speakers, without_names
from app.retrieval.temporal import apply_temporal_boost
from app.retrieval.time_mentions import boost_time_mentions, use_mentioned_times
from app.retrieval.timing import StageTimer
from app.retrieval.vector_leg import VectorLegSettings, vector_leg
from app.retrieval.visibility import load_visible
from app.search_index.client import MemoryIndex, TextHit

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
    levers: Levers = field(default_factory=Levers)
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

    async def search(self, session: AsyncSession, request: SearchRequest) -> SearchResponse:
        settings, switches, levers, timer = (
            self._settings,
            request.switches,
            request.levers,
            StageTimer(),
        )
        status: dict[str, str] = {}

        with timer.stage("query_analysis_ms"):
            analysis = analyze_query(request.query, request.as_of or datetime.now(UTC))

        # What the legs search: the query, without the speakers' names under speaker_query.
        search_text, names = request.query, set[str]()
        if levers.speaker_query:
            with timer.stage("speakers_ms"):
                names = await known_speakers(self._index, request.user_id, request.session_id)
                search_text = without_names(request.query, names)
            status["speaker_query"] = search_text

        repository = MemoryRepository(session)
        vector_hits: list[Candidate] = []
        shortlisted = 0
        text_hits: list[TextHit] | None = []

        async def vector_path() -> tuple[list[Candidate], int]:
            with timer.stage("query_embedding_ms"):
                embedding = await self._embedder.embed_query(
                    search_text, current_tenant(), request.user_id
                )
            options = VectorLegSettings(
                shortlist=settings.candidates_256d,
                keep=settings.candidates_768d,
                ef_search=settings.hnsw_ef_search,
                exact_max=settings.exact_search_max_memories,
                rescore_768d=switches.rescore_768d,
                with_context=levers.context_vector,
                feedback_top=settings.feedback_top if levers.feedback else 0,
                feedback_weight=settings.feedback_weight,
            )
            return await vector_leg(
                repository, request.user_id, request.session_id, embedding, options, timer
            )

        # BM25 needs no embedding: it runs while the query is embedded and the vectors are
        # searched. A task group cancels the other leg when one fails.
        try:
            async with asyncio.TaskGroup() as legs:
                vector_task = legs.create_task(vector_path()) if switches.vector else None
                bm25_task = (
                    legs.create_task(
                        bm25_leg(
                            self._index,
                            request.user_id,
                            search_text,
                            request.session_id,
                            Bm25LegSettings(
                                size=settings.bm25_candidates,
                                context_boost=settings.bm25_context_boost
                                if levers.context_bm25
                                else 0.0,
                                proximity_slop=settings.bm25_proximity_slop
                                if levers.bm25_proximity
                                else None,
                            ),
                            timer,
                        )
                    )
                    if switches.bm25
                    else None
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

        # Stage 4: weighted RRF (or, with the score_fusion lever, normalised score sums).
        # An item absent from a list gets nothing from that list.
        lexical = levers.typed_weights and names_something(search_text, names)
        (weight_vector, weight_bm25), why = leg_weights(
            (settings.rrf_weight_vector, settings.rrf_weight_bm25), levers.balanced_legs, lexical
        )
        if levers.typed_weights:
            status["fusion"] = why
        if request.weight_vector is not None:
            weight_vector = request.weight_vector
        if request.weight_bm25 is not None:
            weight_bm25 = request.weight_bm25
        with timer.stage("rrf_fusion_ms"):
            if levers.score_fusion:
                ranked = fuse_scores(vector_hits, text_hits or [], weight_vector, weight_bm25)
            else:
                ranked = fuse_legs(
                    vector_hits,
                    text_hits or [],
                    request.rrf_k if request.rrf_k is not None else settings.rrf_k,
                    weight_vector,
                    weight_bm25,
                )

        with timer.stage("load_ms"):
            # Rows are re-read from Postgres by id *and user* under the visibility rule: the
            # index is never the only guard.
            rows = await repository.visible_current(
                request.user_id, [c.memory_id for c in ranked], request.session_id
            )
            ranked = load_visible(ranked, rows)

        if levers.speaker:
            with timer.stage("speaker_ms"):
                ranked, named = boost_named_speakers(request.query, ranked, settings.speaker_boost)
            status["speaker"] = f"boosted {', '.join(sorted(named))}" if named else "none named"

        if levers.entities:
            with timer.stage("entities_ms"):
                ranked, entities = boost_shared_entities(
                    request.query, ranked, settings.entity_boost
                )
            status["entities"] = f"boosted {', '.join(entities)}" if entities else "none named"

        if levers.neighbours:
            with timer.stage("neighbours_ms"):
                head = ranked[: settings.neighbour_top_n]
                chains, follows = links(head)
                found = await repository.neighbours(
                    request.user_id, chains, follows, request.session_id
                )
                ranked, joined = spread_to_neighbours(
                    ranked, found, settings.neighbour_decay, settings.neighbour_top_n
                )
            status["neighbours"] = f"{joined} joined"

        if levers.time_mentions:
            with timer.stage("time_mentions_ms"):
                use_mentioned_times(ranked)
                if analysis.asks_when:
                    ranked, naming = boost_time_mentions(ranked, settings.time_mention_boost)
                    status["time_mentions"] = f"boosted {naming} naming a time"
                else:
                    status["time_mentions"] = "not a when-question"

        # Stage 5: temporal boost, only for queries with a resolved window.
        if analysis.window is not None and switches.temporal:
            with timer.stage("temporal_boost_ms"):
                ranked = apply_temporal_boost(
                    ranked,
                    analysis.window,
                    settings.temporal_weight_fused,
                    settings.temporal_weight_time,
                    settings.temporal_min_score,
                )
            status["temporal"] = "applied"
        else:
            status["temporal"] = "off" if not switches.temporal else "no time window in query"

        # Stage 6: de-duplication over the head of the list (what can still be shown).
        if switches.dedup:
            with timer.stage("dedup_ms"):
                ranked, dropped = await dedup_head(
                    ranked,
                    request.top_k,
                    max(request.top_k * 2, settings.rerank_top_n),
                    lambda ids: repository.near_duplicate_pairs(
                        request.user_id, ids, settings.dedup_threshold
                    ),
                )
            status["dedup"] = f"dropped {len(dropped)}"
        else:
            status["dedup"] = "off"

        # Stage 7: cross-encoder re-ranking, skipped visibly when no model is configured.
        if switches.rerank and self._cross_encoder is not None:
            with timer.stage("cross_encoder_ms"):
                ranked = await rerank(
                    request.query, ranked, self._cross_encoder, settings.rerank_top_n
                )
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
            with timer.stage("version_chain_ms"):
                earlier = await repository.superseded_versions(
                    request.user_id,
                    list({c.chain_id for c in results if c.chain_id}),
                    request.session_id,
                )
                results = with_history(results, earlier, settings.history_max_versions)
            status["history"] = "applied"
        else:
            status["history"] = "off" if not switches.history else "no history intent"

        total_ms = timer.total_ms()
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
            levers=msgspec.structs.asdict(levers),
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
