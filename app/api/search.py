"""Search endpoint: the 8-stage retrieval pipeline over one user's memories."""

from __future__ import annotations

import dataclasses
import uuid

from litestar import Controller, Request, post

from app.api.consistency import wait_bound_s
from app.api.contract import WITH_BODY, UserId, problems
from app.api.reads import READ_HEADERS, Reads
from app.api.schemas.memories import MemoryOut
from app.api.schemas.search import (
    IndexLagOut,
    SearchBody,
    SearchHitOut,
    SearchOut,
    StageScoreOut,
)
from app.config import RetrievalSettings
from app.errors import InvalidInputError
from app.memories.event_dates import event_date
from app.memories.fields import check_instant, check_user_id
from app.memories.filters import parse_filter
from app.retrieval.profiles import lever_changes
from app.retrieval.request import SearchRequest, SearchResponse
from app.runtime import Runtime


def search_request(
    user_id: str, data: SearchBody, retrieval: RetrievalSettings, request_id: str | None
) -> SearchRequest:
    """The search `data` asks for, checked: the search endpoint's and the context block's."""
    check_user_id(user_id)
    top_k = data.top_k if data.top_k is not None else retrieval.default_top_k
    if not 1 <= top_k <= retrieval.max_top_k:
        raise InvalidInputError(
            f"top_k must be between 1 and {retrieval.max_top_k}, not {top_k}",
            field="top_k",
        )
    if not data.query.strip():
        raise InvalidInputError("query must not be empty", field="query")
    as_of = check_instant(data.as_of, "as_of")
    if data.min_relevance and not data.stages.vector:
        raise InvalidInputError(
            "min_relevance needs the vector stage: relevance is the query's cosine to each "
            "memory, measured with the vector leg's query vector; switch stages.vector on "
            "or leave min_relevance out",
            field="min_relevance",
        )
    return SearchRequest(
        user_id=user_id,
        query=data.query,
        top_k=top_k,
        session_id=data.session_id,
        agent_id=data.agent_id,
        run_id=data.run_id,
        as_of=as_of,
        switches=data.stages,
        profile=data.profile,
        levers=lever_changes(data.levers),
        rrf_k=data.rrf.k,
        weight_vector=data.rrf.weight_vector,
        weight_bm25=data.rrf.weight_bm25,
        request_id=request_id or uuid.uuid4().hex,
        filters=parse_filter(data.filters) if data.filters is not None else None,
        min_relevance=data.min_relevance,
    )


def search_hits(response: SearchResponse, *, explain: bool) -> list[SearchHitOut]:
    """The pipeline's results on the wire: ranked (a history version beside its memory takes
    no rank), and with every stage's rank and score when `explain`."""
    hits = []
    rank = 0
    for candidate in response.results:
        assert candidate.memory is not None
        if candidate.history_of is None:
            rank += 1
        hits.append(
            SearchHitOut(
                memory=MemoryOut.of(candidate.memory),
                rank=rank,
                score=candidate.score,
                relevance=candidate.relevance,
                superseded=not candidate.memory.is_current,
                # On the wire, the memory's id: the same for the hit and its versions.
                history_of=None if candidate.history_of is None else candidate.memory.chain_id,
                event_at=event_date(candidate.memory) or candidate.memory.created_at,
                earlier=candidate.later_id is not None,
                later_memory_id=candidate.later_id,
                explanation={
                    stage: StageScoreOut(rank=s["rank"], score=s["score"])
                    for stage, s in candidate.explanation().items()
                }
                if explain and candidate.history_of is None
                else None,
            )
        )
    return hits


async def search_user(
    user_id: str, data: SearchBody, runtime: Runtime, reads: Reads, request_id: str | None
) -> SearchOut:
    """One search as the API answers it: checked, run by the search service (index wait,
    replica or writer, index lag), on the wire; the search endpoint's, and any other surface's
    that searches (a compatibility API answers from the same)."""
    settings = runtime.settings
    outcome = await runtime.search.search(
        search_request(user_id, data, settings.retrieval, request_id),
        consistency=data.consistency,
        wait_timeout_s=wait_bound_s(settings.relay, data.wait_timeout_ms),
    )
    reads.report(outcome.route)
    response = outcome.response
    return SearchOut(
        results=search_hits(response, explain=data.explain),
        missing_legs=response.missing_legs,
        stages=response.stage_status,
        stage_durations_ms=response.stage_durations_ms,
        duration_ms=response.duration_ms,
        index_lag=IndexLagOut(
            **dataclasses.asdict(outcome.freshness), consistency=data.consistency
        ),
        sentences_pending=response.sentences_pending,
        query_analysis=response.analysis.explanation() if data.explain else None,
    )


class SearchController(Controller):
    path = "/v1/users/{user_id:str}/search"
    tags = ["search"]

    @post(
        "/",
        status_code=200,
        summary="Search a user's memories (8-stage hybrid retrieval)",
        responses=problems(*WITH_BODY),
        response_headers=READ_HEADERS,
    )
    async def search(
        self,
        user_id: UserId,
        data: SearchBody,
        runtime: Runtime,
        reads: Reads,
        request: Request,
    ) -> SearchOut:
        return await search_user(user_id, data, runtime, reads, request.headers.get("X-Request-ID"))
