"""The 8-stage retrieval pipeline: a plan, then named steps over plain candidates.

1 query analysis · [speaker-free query text] · 2 Matryoshka vector search (256D exact for a
small user, else HNSW → exact 768D [→ feedback]) · 3 BM25 [+ proximity] [both legs again for
each part of a multi-part question, beside them] · 4 weighted RRF [balanced or typed weights]
[+ the parts' rankings] · load and visibility · [speaker · entities · neighbours · time
mentions · specificity] · 5 temporal boost · [sessions] · 6 de-duplication · 7 cross-encoder
· relevance · [relevance order · relevance guard] · [part slots] · [newer first] · 8 history.
The bracketed steps and the legs' options are levers, each declared beside its step; the
profiles (app/retrieval/profiles.py) are recipes of them: `paper` runs SPEC's 8 stages
exactly, `default` the levers that earned their place. Every stage can be switched off per
request; one loop (steps.py) times each step and records what it did.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import UTC, datetime

import structlog
from sqlalchemy.ext.asyncio import AsyncSession

from app import metrics, tracing
from app.config import RetrievalSettings
from app.memories.filters import to_sql
from app.ml.cross_encoder import CrossEncoderScorer
from app.ml.embedder import Embedder
from app.retrieval import legs, ranking
from app.retrieval.candidates import Candidate
from app.retrieval.early_embedding import EarlyEmbedding
from app.retrieval.fusion import fuse, plan_weights
from app.retrieval.legs import QUERY_STEPS, LegHits, LegQuery, question_embedded, search_legs
from app.retrieval.multilingual_leg import vector_list
from app.retrieval.parts import fuse_parts, part_texts, parts_to_search, search_parts
from app.retrieval.profiles import plan_search
from app.retrieval.query_analysis import analyze_query
from app.retrieval.query_parts import split_query
from app.retrieval.ranking import RANKING_STEPS
from app.retrieval.request import SearchRequest, SearchResponse
from app.retrieval.specificity import WordRarityCache
from app.retrieval.steps import SearchContext, run_steps
from app.retrieval.timing import StageTimer
from app.retrieval.vector_sql import SearchRepository
from app.search_index.client import MemoryIndex

log = structlog.get_logger(__name__)

# The explanation's stages, in the order they run (the console's columns).
STAGES = (*legs.STAGES, *ranking.STAGES)


class RetrievalPipeline:
    def __init__(
        self,
        embedder: Embedder,
        index: MemoryIndex,
        settings: RetrievalSettings,
        cross_encoder: CrossEncoderScorer | None = None,
    ) -> None:
        self._embedder = embedder
        self._index = index
        self._settings = settings
        self._cross_encoder = cross_encoder
        self._word_rarity = WordRarityCache(settings.specificity_ttl_s)
        self._early = EarlyEmbedding()

    async def search(self, session: AsyncSession, request: SearchRequest) -> SearchResponse:
        """The stages over the user's memories. While tracing, a span `retrieval.search`
        whose children are the stages' spans (app/retrieval/timing.py)."""
        with tracing.span(
            "retrieval.search",
            {
                "cognis.retrieval.top_k": request.top_k,
                "cognis.retrieval.query_chars": len(request.query),
            },
        ):
            tracing.content("cognis.retrieval.query", request.query)
            return await self._search(session, request)

    async def _search(self, session: AsyncSession, request: SearchRequest) -> SearchResponse:
        timer, status = StageTimer(), dict[str, str]()
        plan = plan_search(request, self._settings)
        with timer.stage("query_analysis_ms"):
            analysis = analyze_query(request.query, request.as_of or datetime.now(UTC))
        context = SearchContext(
            request,
            plan,
            analysis,
            # The filter (with the agent's and run's visibility), compiled once for Postgres:
            # every read of the search applies it.
            SearchRepository(
                session, to_sql(scoped) if (scoped := request.scoped_filter) else None
            ),
            self._index,
            self._embedder,
            self._cross_encoder,
            self._word_rarity,
        )
        self._early.start(context)  # the model embeds while the speakers are looked up
        query = await run_steps(QUERY_STEPS, LegQuery(request.query), context, timer, status)
        self._early.found(context, query.speakers)
        if query.text != request.query:  # the parts of what the legs search
            analysis = replace(analysis, parts=split_query(query.text))
            context = replace(context, analysis=analysis)
        weights, why = plan_weights(plan, query.text, query.speakers)
        if why is not None:
            status["fusion"] = why
        parts = tuple(part_texts(parts_to_search(plan, analysis.parts), query.speakers))
        hits, found = await self._legs(
            query, parts if len(parts) > 1 else (), context, weights, timer
        )
        status.update(hits.status(plan))
        with timer.stage("rrf_fusion_ms"):
            vector = vector_list(hits.vector, hits.multilingual)
            ranked = fuse(plan, vector, hits.text or [], weights)
            if found:
                ranked = fuse_parts(ranked, found, plan.rrf_k)
        if found:
            status["parts"] = " | ".join(parts)
        question = question_embedded(plan, request)
        # Relevance is measured with the vector leg's query vector: none when the request
        # switched the vector stage off (to skip the model), and then no relevance either.
        context = replace(
            context,
            query_vector=hits.query_vector,
            multilingual_query_vector=hits.multilingual.query_vector,
            english_query=hits.multilingual.english_query,
            parts=parts if found else (),
            question_text=question if query.embedded != question else None,
        )
        results = await run_steps(RANKING_STEPS, ranked, context, timer, status)

        total_ms = timer.total_ms()
        log.info(
            "memory_retrieval",
            request_id=request.request_id,
            user_id=request.user_id,
            duration_ms=total_ms,
            stage_durations=timer.durations,
            candidates_256d=hits.shortlisted,
            candidates_768d=len(hits.vector),
            candidates_bm25=len(hits.text or []),
            results_final=len(results),
            temporal_query=analysis.temporal,
            history_query=analysis.history,
            missing_legs=hits.missing,
            stages=status,
            levers=dict(plan.levers),
            index_lag=request.index_lag,
        )
        metrics.observe(timer.durations, total_ms, hits.missing)
        tracing.annotate(
            {
                "cognis.retrieval.profile": plan.profile,
                "cognis.retrieval.candidates_256d": hits.shortlisted,
                "cognis.retrieval.candidates_768d": len(hits.vector),
                "cognis.retrieval.candidates_bm25": len(hits.text or []),
                "cognis.retrieval.results": len(results),
                "cognis.retrieval.missing_legs": hits.missing,
                "cognis.retrieval.temporal_query": analysis.temporal,
            }
        )
        return SearchResponse(
            results=results,
            analysis=analysis,
            missing_legs=hits.missing,
            stage_durations_ms=timer.durations,
            stage_status=status,
            duration_ms=total_ms,
        )

    async def _legs(
        self,
        query: LegQuery,
        parts: tuple[str, ...],
        context: SearchContext,
        weights: tuple[float, float],
        timer: StageTimer,
    ) -> tuple[LegHits, list[list[Candidate]]]:
        """The legs for the whole question and, beside them, for each of its parts."""
        if not parts:
            return await search_legs(query, context, timer), []

        async def timed_parts() -> list[list[Candidate]]:
            with timer.stage("parts_ms"):
                return await search_parts(parts, query, context, weights)

        try:
            async with asyncio.TaskGroup() as group:
                whole = group.create_task(search_legs(query, context, timer))
                each = group.create_task(timed_parts())
        except ExceptionGroup as failed:
            raise failed.exceptions[0] from None
        return whole.result(), each.result()
