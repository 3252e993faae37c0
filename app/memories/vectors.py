"""The vector SQL that ingestion and retrieval share: the HNSW scan's settings, the 256D and
multilingual shortlists, the exact 768D and multilingual cosines of given memories, and
ingestion's two-stage nearest search. Retrieval's own vector reads (context and sentence
cosines, neighbours, near duplicates) live beside its stages, in app/retrieval/vector_sql.py.
Every statement is bound to a user."""

from __future__ import annotations

import uuid
from typing import Any

import numpy as np
from sqlalchemy import ColumnElement, any_, bindparam, func, literal, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.sql.util import ClauseAdapter

from app.db.models import Memory
from app.memories.expiry import unexpired
from app.memories.sql import UUID_ARRAY, visible_in_session
from app.ml.embedder import Embedding
from app.vocabulary import NON_LATIN_LANGUAGES

# The retrieval hot path's statements, built once: building an aliased ORM select per request
# cost more (3-4 ms) than running it. Every one is bound to a user.
MEMORIES = Memory.__table__
IDS = bindparam("ids", type_=UUID_ARRAY)
_query_256d = bindparam("query", type_=Memory.embedding_256d.type)


def coarse_candidates_statement(distance: Any) -> Any:
    """The user's visible current memories nearest by `distance`, ordered by its label (the
    query vector is bound once)."""
    labelled = distance.label("distance")
    return (
        select(MEMORIES.c.id, labelled)
        .where(
            MEMORIES.c.user_id == bindparam("user_id"),
            MEMORIES.c.is_current,
            visible_in_session(bindparam("session_id", type_=Memory.session_id.type)),
            unexpired(),
        )
        .order_by(labelled)
        .limit(bindparam("limit"))
    )


_COARSE_CANDIDATES = coarse_candidates_statement(
    MEMORIES.c.embedding_256d.cosine_distance(_query_256d)
)
# The same, scanned exactly (for a user small enough): "+ 0" makes the sort key an expression
# the HNSW index cannot serve, so Postgres reads the user's rows by the user index and sorts.
_COARSE_CANDIDATES_EXACT = coarse_candidates_statement(
    MEMORIES.c.embedding_256d.cosine_distance(_query_256d) + 0.0
)
QUERY_768D = bindparam("query", type_=Memory.embedding_768d.type)


def exact_768d(*distances: Any) -> Any:
    """Stage 2b's exact 768D distances of the given memories of one user: the content's,
    then `distances`."""
    return select(
        MEMORIES.c.id,
        MEMORIES.c.embedding_768d.cosine_distance(QUERY_768D).label("distance"),
        *distances,
    ).where(MEMORIES.c.user_id == bindparam("user_id"), MEMORIES.c.id == any_(IDS))


_EXACT_768D = exact_768d()


_query_ml = bindparam("query", type_=Memory.embedding_ml.type)
_ML_DISTANCE = MEMORIES.c.embedding_ml.cosine_distance(_query_ml)
# Not in the Latin script: whether a Latin-script query needs the multilingual leg (migration
# 0034's partial index answers it).
OTHER_LANGUAGE = MEMORIES.c.language.in_(NON_LATIN_LANGUAGES)
_MULTILINGUAL = coarse_candidates_statement(_ML_DISTANCE).where(
    MEMORIES.c.embedding_ml.is_not(None)
)
_MULTILINGUAL_EXACT = coarse_candidates_statement(_ML_DISTANCE + 0.0).where(
    MEMORIES.c.embedding_ml.is_not(None)
)
_EXACT_ML = select(MEMORIES.c.id, _ML_DISTANCE.label("distance")).where(
    MEMORIES.c.user_id == bindparam("user_id"),
    MEMORIES.c.id == any_(IDS),
    MEMORIES.c.embedding_ml.is_not(None),
)


# A large user's filtered search estimates the filter's share of its memories from this many
# of them (read beside the query's embedding).
FILTER_SAMPLE_ROWS = 2_000
# pgvector's hnsw.max_scan_tuples (its default): an iterative scan that would have to visit
# more tuples than this to fill its list gives up short. It visits other users' rows too, so
# a filter is taken as rare below 4x the share that would just fill the list in that budget
# (a 1 % filter went through the index at 10,000 and 100,000 memories, came back short and
# was scanned again: 243 and 468 ms at p50 against 86 and 254 ms scanned at once).
INDEX_SCAN_TUPLES = 20_000
RARE_FILTER_MARGIN = 4


async def set_hnsw_scan(
    session: AsyncSession,
    ef_search: int,
    user_id: str,
    exact_max: int,
    where: ColumnElement[bool] | None = None,
    shortlist: int = 200,
    sample_rows: int = FILTER_SAMPLE_ROWS,
) -> bool:
    """This transaction's HNSW scan: `ef_search`, and iterative scans (pgvector >= 0.8) that
    keep filling the list when the user filter rejects neighbours. In the same round trip,
    whether stage 2a should scan exactly rather than through the index.

    A user with at most `exact_max` current memories (counted from the index alone, stopping
    after one more: migration 0020) is scanned exactly, filter or not: cheap, and better than
    the index's approximation. A larger user with a filter (`where`) is scanned exactly when
    fewer than RARE_FILTER_MARGIN x `shortlist` / INDEX_SCAN_TUPLES of its first `sample_rows`
    memories match (4 % by default), since the index would give up before it found
    `shortlist` of them. Counting every match instead read all of a large user's rows
    (100,000 for a 1 % filter) before the scan read them again. A sample can misjudge; a
    short index scan then falls back to an exact one (`MemoryRepository.coarse_candidates`)."""
    count = (
        select(func.count())
        .select_from(
            select(literal(1))
            .select_from(MEMORIES)
            .where(MEMORIES.c.user_id == user_id, MEMORIES.c.is_current)
            .limit(max(exact_max, 0) + 1)
            .subquery()
        )
        .scalar_subquery()
    )
    columns: list[Any] = [
        func.set_config("hnsw.ef_search", str(int(ef_search)), True),
        func.set_config("hnsw.iterative_scan", "relaxed_order", True),
        (count <= max(exact_max, 0)).label("small"),
    ]
    statement = select(*columns, literal(0).label("read"), literal(0).label("matching"))
    if where is not None:
        sample = (
            select(MEMORIES)
            .where(MEMORIES.c.user_id == user_id, MEMORIES.c.is_current)
            .limit(sample_rows)
            .subquery()
        )
        # One pass over the sample: how many rows were read, and how many of them match.
        counts = (
            select(
                func.count().label("read"),
                func.count().filter(ClauseAdapter(sample).traverse(where)).label("matching"),
            )
            .select_from(sample)
            .subquery()
        )
        statement = select(*columns, counts.c.read, counts.c.matching).select_from(counts)
    row = (await session.execute(statement)).one()
    if exact_max <= 0:
        return False
    if row.small:
        return True
    rare = row.matching * INDEX_SCAN_TUPLES < RARE_FILTER_MARGIN * shortlist * row.read
    return where is not None and rare


class NearestMemories:
    """The shared vector reads of a memory repository: its session, and a search's compiled
    filter (`where`) that every shortlist applies."""

    session: AsyncSession
    where: ColumnElement[bool] | None

    async def scan_choice(
        self, user_id: str, ef_search: int, exact_max: int, shortlist: int = 200
    ) -> bool:
        """Set this transaction's HNSW scan and say whether stage 2a should scan exactly
        (`set_hnsw_scan`, with this repository's filter). It needs no query vector, so a
        search runs it while the query is embedded."""
        return await set_hnsw_scan(
            self.session, ef_search, user_id, exact_max, self.where, shortlist
        )

    async def coarse_candidates(
        self,
        user_id: str,
        query_256d: np.ndarray,
        session_id: str | None,
        limit: int,
        ef_search: int,
        exact_max: int = 0,
        exact: bool | None = None,
    ) -> list[tuple[uuid.UUID, float]]:
        """Stage 2a: the user's visible current memories nearest by 256D cosine: exactly when
        the user has at most `exact_max` current memories, else by the HNSW index (and then
        exactly after all if the index returns fewer than `limit`). `exact`: the choice, when
        `scan_choice` already made it in this transaction."""
        small = exact
        if small is None:
            small = await self.scan_choice(user_id, ef_search, exact_max, limit)
        parameters = {
            "user_id": user_id,
            "query": query_256d,
            "session_id": session_id,
            "limit": limit,
        }
        rows = (await self.session.execute(self._filtered_statement(exact=small), parameters)).all()
        if not small and len(rows) < limit:
            # The index came back short: fewer than `limit` of the rows its iterative scan
            # reached (hnsw.max_scan_tuples) match the filters, so the matches are few and
            # spread out; only an exact scan finds them all.
            rows = (
                await self.session.execute(self._filtered_statement(exact=True), parameters)
            ).all()
        # relaxed_order may return neighbours slightly out of order: sort exactly here.
        return sorted(((r.id, 1.0 - float(r.distance)) for r in rows), key=lambda pair: -pair[1])

    async def multilingual_candidates(
        self,
        user_id: str,
        query_ml: np.ndarray,
        session_id: str | None,
        limit: int,
        exact: bool,
        other_languages_only: bool,
    ) -> list[tuple[uuid.UUID, float]]:
        """The user's visible current memories nearest by multilingual cosine (only those not
        in English, when `other_languages_only`), exactly or by the HNSW index."""
        statement = _MULTILINGUAL_EXACT if exact else _MULTILINGUAL
        if other_languages_only:
            statement = statement.where(OTHER_LANGUAGE)
        if self.where is not None:
            statement = statement.where(self.where)
        parameters = {"user_id": user_id, "query": query_ml, "session_id": session_id}
        rows = (await self.session.execute(statement, {**parameters, "limit": limit})).all()
        return sorted(((r.id, 1.0 - float(r.distance)) for r in rows), key=lambda pair: -pair[1])

    async def exact_ml_scores(
        self, user_id: str, memory_ids: list[uuid.UUID], query_ml: np.ndarray
    ) -> dict[uuid.UUID, float]:
        """The multilingual cosine of the given memories (those with a vector) to the query."""
        if not memory_ids:
            return {}
        rows = await self.session.execute(
            _EXACT_ML, {"user_id": user_id, "ids": memory_ids, "query": query_ml}
        )
        return {r.id: 1.0 - float(r.distance) for r in rows}

    def _filtered_statement(self, exact: bool) -> Any:
        statement = _COARSE_CANDIDATES_EXACT if exact else _COARSE_CANDIDATES
        return statement if self.where is None else statement.where(self.where)

    async def exact_768d_scores(
        self, user_id: str, memory_ids: list[uuid.UUID], query_768d: np.ndarray
    ) -> dict[uuid.UUID, float]:
        """Stage 2b: exact 768D cosine for the given candidates (computed in Postgres)."""
        if not memory_ids:
            return {}
        rows = await self.session.execute(
            _EXACT_768D, {"user_id": user_id, "ids": memory_ids, "query": query_768d}
        )
        return {r.id: 1.0 - float(r.distance) for r in rows}

    async def nearest_current(
        self,
        user_id: str,
        embedding: Embedding,
        session_id: str | None,
        limit: int,
        coarse_limit: int,
        ef_search: int,
        exact_max: int = 0,
    ) -> list[tuple[uuid.UUID, float]]:
        """The two-stage search of stage 2 in one call (ingestion's step 3 uses it): the 256D
        shortlist of `coarse_limit`, re-scored exactly in 768D; the best `limit`."""
        coarse = await self.coarse_candidates(
            user_id, embedding.coarse, session_id, coarse_limit, ef_search, exact_max
        )
        exact = await self.exact_768d_scores(user_id, [i for i, _ in coarse], embedding.full)
        return sorted(exact.items(), key=lambda pair: -pair[1])[:limit]
