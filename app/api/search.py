"""Search endpoint: hybrid retrieval over one user's current memories."""

from __future__ import annotations

from litestar import Controller, post
from litestar.datastructures import State
from sqlalchemy.ext.asyncio import AsyncSession

from app.api.schemas import MemoryOut, SearchBody, SearchHitOut, SearchOut
from app.errors import InvalidInputError
from app.memories.domain import check_user_id
from app.retrieval.hybrid import SearchRequest


class SearchController(Controller):
    path = "/v1/users/{user_id:str}/search"
    tags = ["search"]

    @post("/", status_code=200, summary="Hybrid search (vector + BM25, weighted RRF)")
    async def search(
        self, user_id: str, data: SearchBody, db_session: AsyncSession, state: State
    ) -> SearchOut:
        settings = state.resources.settings
        check_user_id(user_id)
        top_k = data.top_k if data.top_k is not None else settings.default_top_k
        if not 1 <= top_k <= settings.max_top_k:
            raise InvalidInputError(
                f"top_k must be between 1 and {settings.max_top_k}, not {top_k}", field="top_k"
            )
        if not data.query.strip():
            raise InvalidInputError("query must not be empty", field="query")
        response = await state.resources.search.search(
            db_session,
            SearchRequest(
                user_id=user_id, query=data.query, top_k=top_k, session_id=data.session_id
            ),
        )
        return SearchOut(
            results=[
                SearchHitOut(
                    memory=MemoryOut.of(r.memory),
                    score=r.score,
                    vector_rank=r.vector_rank,
                    vector_score=r.vector_score,
                    bm25_rank=r.bm25_rank,
                    bm25_score=r.bm25_score,
                )
                for r in response.results
            ],
            missing_legs=response.missing_legs,
            stage_durations_ms=response.stage_durations_ms,
        )
