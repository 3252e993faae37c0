"""Every query on memories. Each method takes the user id: isolation is structural."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

import numpy as np
from sqlalchemy import (
    ColumnElement,
    Float,
    Select,
    Text,
    and_,
    any_,
    bindparam,
    exists,
    func,
    literal,
    or_,
    select,
    tuple_,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased, defer
from sqlalchemy.sql.elements import CollectionAggregate
from sqlalchemy.sql.util import ClauseAdapter

from app.db.models import Memory
from app.memories.context import Turn, turn_line
from app.memories.expiry import unexpired
from app.ml.embedder import Embedding
from app.vocabulary import NON_LATIN_LANGUAGES

_UUID_ARRAY = ARRAY(Memory.id.type)


def one_of(ids: list[uuid.UUID]) -> CollectionAggregate[bool]:
    """`= ANY($1)` with one uuid[] parameter, for `column == one_of(ids)`.

    An expanding `IN ($1, ..., $n)` re-plans for every list length and, once Postgres
    switches a prepared statement to its generic plan, can scan the user's whole set: measured
    at 10,000 memories, 16 ms for 20 ids against 1.5 ms for the array form."""
    return any_(bindparam(None, ids, type_=_UUID_ARRAY))


def visible_in_session(session_id: Any) -> ColumnElement[bool]:
    """USER memories, and CONTEXT ones of the given session: none when it is None, since a
    CONTEXT memory always has one. `session_id` is a value or a bound parameter."""
    columns = Memory.__table__.c
    return or_(
        columns.scope == "USER",
        and_(columns.scope == "CONTEXT", columns.session_id == session_id),
    )


# The retrieval hot path's statements, built once: building an aliased ORM select per request
# cost more (3-4 ms) than running it. Every one is bound to a user.
_memories = Memory.__table__
_ids = bindparam("ids", type_=_UUID_ARRAY)
_query_256d = bindparam("query", type_=Memory.embedding_256d.type)


def _coarse_candidates(distance: Any) -> Any:
    """The user's visible current memories nearest by `distance`, ordered by its label (the
    query vector is bound once)."""
    labelled = distance.label("distance")
    return (
        select(_memories.c.id, labelled)
        .where(
            _memories.c.user_id == bindparam("user_id"),
            _memories.c.is_current,
            visible_in_session(bindparam("session_id", type_=Memory.session_id.type)),
            unexpired(),
        )
        .order_by(labelled)
        .limit(bindparam("limit"))
    )


_COARSE_CANDIDATES = _coarse_candidates(_memories.c.embedding_256d.cosine_distance(_query_256d))
# The same, scanned exactly (for a user small enough): "+ 0" makes the sort key an expression
# the HNSW index cannot serve, so Postgres reads the user's rows by the user index and sorts.
_COARSE_CANDIDATES_EXACT = _coarse_candidates(
    _memories.c.embedding_256d.cosine_distance(_query_256d) + 0.0
)
_query_768d = bindparam("query", type_=Memory.embedding_768d.type)
_sentences = (
    func.unnest(_memories.c.sentence_embeddings_768d).table_valued("vector").render_derived()
)


def _exact_768d(*distances: Any) -> Any:
    """Stage 2b's exact 768D distances of the given memories of one user: the content's,
    then `distances`."""
    return select(
        _memories.c.id,
        _memories.c.embedding_768d.cosine_distance(_query_768d).label("distance"),
        *distances,
    ).where(_memories.c.user_id == bindparam("user_id"), _memories.c.id == any_(_ids))


_CONTEXT_DISTANCE = _memories.c.context_embedding_768d.cosine_distance(_query_768d).label(
    "context_distance"
)
# The nearest of the memory's sentence vectors (NULL: none, or not embedded yet).
_SENTENCE_DISTANCE = (
    select(func.min(_sentences.c.vector.op("<=>", return_type=Float)(_query_768d)))
    .scalar_subquery()
    .label("sentence_distance")
)
_EXACT_768D = _exact_768d()
_EXACT_768D_WITH_CONTEXT = _exact_768d(_CONTEXT_DISTANCE)
_EXACT_768D_ALL = _exact_768d(_CONTEXT_DISTANCE, _SENTENCE_DISTANCE)


_query_ml = bindparam("query", type_=Memory.embedding_ml.type)
_ML_DISTANCE = _memories.c.embedding_ml.cosine_distance(_query_ml)
# Not in the Latin script: whether a Latin-script query needs the multilingual leg (migration
# 0034's partial index answers it).
_OTHER_LANGUAGE = _memories.c.language.in_(NON_LATIN_LANGUAGES)
_MULTILINGUAL = _coarse_candidates(_ML_DISTANCE).where(_memories.c.embedding_ml.is_not(None))
_MULTILINGUAL_EXACT = _coarse_candidates(_ML_DISTANCE + 0.0).where(
    _memories.c.embedding_ml.is_not(None)
)
_HAS_OTHER_LANGUAGE = select(
    exists().where(
        _memories.c.user_id == bindparam("user_id"), _memories.c.is_current, _OTHER_LANGUAGE
    )
)
_EXACT_ML = select(_memories.c.id, _ML_DISTANCE.label("distance")).where(
    _memories.c.user_id == bindparam("user_id"),
    _memories.c.id == any_(_ids),
    _memories.c.embedding_ml.is_not(None),
)


@dataclass(frozen=True, slots=True)
class MemoryCosines:
    """A memory's exact 768D cosines to the query: its content's, its contextual text's and
    its nearest sentence's (None where it has no such vector)."""

    content: float
    context: float | None
    sentence: float | None

    def best(self, context: bool, sentence: bool) -> float:
        """The best cosine among the content's and, where asked for and present, the others'."""
        chosen = [self.content]
        if context and self.context is not None:
            chosen.append(self.context)
        if sentence and self.sentence is not None:
            chosen.append(self.sentence)
        return max(chosen)


_a, _b = _memories.alias("a"), _memories.alias("b")
_NEAR_DUPLICATE_PAIRS = select(_a.c.id, _b.c.id).where(
    _a.c.user_id == bindparam("user_id"),
    _b.c.user_id == bindparam("user_id"),
    _a.c.id == any_(_ids),
    _b.c.id == any_(_ids),
    _a.c.id < _b.c.id,
    _a.c.embedding_768d.cosine_distance(_b.c.embedding_768d) <= bindparam("max_distance"),
)


NO_VECTORS = (
    defer(Memory.embedding_768d),
    defer(Memory.embedding_256d),
    defer(Memory.context_embedding_768d),
    defer(Memory.sentence_embeddings_768d),
    defer(Memory.embedding_ml),
)


@dataclass(frozen=True, slots=True)
class ListFilter:
    scope: str | None = None
    session_id: str | None = None
    category: str | None = None
    include_superseded: bool = False
    where: ColumnElement[bool] | None = None  # a compiled filter (app/memories/filters.py)
    # Ids from .. to (inclusive): those starting with a short id's digits (id_prefix_range),
    # a memory's id or a version's.
    id_range: tuple[uuid.UUID, uuid.UUID] | None = None


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
            .select_from(_memories)
            .where(_memories.c.user_id == user_id, _memories.c.is_current)
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
            select(_memories)
            .where(_memories.c.user_id == user_id, _memories.c.is_current)
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


def _listed(user_id: str, filters: ListFilter) -> Select[Memory]:
    """The user's unexpired memories that a list with `filters` shows (unordered)."""
    query = select(Memory).where(Memory.user_id == user_id, unexpired())
    if not filters.include_superseded:
        query = query.where(Memory.is_current)
    if filters.scope is not None:
        query = query.where(Memory.scope == filters.scope)
    if filters.session_id is not None:
        query = query.where(Memory.session_id == filters.session_id)
    if filters.category is not None:
        query = query.where(Memory.category == filters.category)
    if filters.where is not None:
        query = query.where(filters.where)
    if filters.id_range is not None:
        # A short id is the start of a memory's id or of one of its versions' ids.
        low, high = filters.id_range
        query = query.where(or_(Memory.chain_id.between(low, high), Memory.id.between(low, high)))
    return query


class MemoryRepository:
    def __init__(self, session: AsyncSession, where: ColumnElement[bool] | None = None) -> None:
        """`where`: a search's filter (app/memories/filters.py, compiled): every read that
        finds or shows a search's memories (the vector leg, load, neighbours, history)
        applies it, so a memory it excludes is never ranked."""
        self.session = session
        self.where = where

    def _filtered(self) -> tuple[ColumnElement[bool], ...]:
        return () if self.where is None else (self.where,)

    async def now(self) -> datetime:
        """The transaction's timestamp: every version written in it shares this instant."""
        return await self.session.scalar(select(func.now()))  # type: ignore[return-value]

    async def named(self, user_id: str, any_id: uuid.UUID) -> Memory | None:
        """The version an id of the user's names, unless its memory has expired. A memory's
        id (its chain's: its version 1's id, which every version carries as chain_id) names
        its latest version: the current one, or the last one once the memory is deleted. Any
        later version's id names that version."""
        names_memory = Memory.chain_id == any_id
        return await self.session.scalar(
            select(Memory)
            .where(
                Memory.user_id == user_id,
                or_(names_memory, Memory.id == any_id),
                unexpired(),
            )
            .order_by(names_memory.desc(), Memory.version.desc())
            .limit(1)
        )

    async def current_for_update(self, user_id: str, chain_id: uuid.UUID) -> Memory | None:
        """The chain's current version, locked until the transaction ends; None when it has
        none (deleted). A writer that ended it while this one waited for the lock makes it
        None too: the caller reads again (`current_in_chain`) and locks the successor."""
        return await self.session.scalar(
            select(Memory)
            .where(
                Memory.user_id == user_id,
                Memory.chain_id == chain_id,
                Memory.is_current,
                unexpired(),
            )
            .with_for_update()
            # Re-read under the lock: the session may hold this row as it was before.
            .execution_options(populate_existing=True)
        )

    async def get_many(
        self, user_id: str, memory_ids: list[uuid.UUID], *conditions: ColumnElement[bool]
    ) -> dict[uuid.UUID, Memory]:
        """Rows to show, without their embeddings (1,024 floats a row: most of the bytes);
        those of expired memories are not shown."""
        if not memory_ids:
            return {}
        rows = await self.session.scalars(
            select(Memory)
            .where(
                Memory.user_id == user_id,
                Memory.id == one_of(memory_ids),
                unexpired(),
                *conditions,
            )
            .options(*NO_VECTORS)
        )
        return {m.id: m for m in rows}

    async def visible_current(
        self, user_id: str, memory_ids: list[uuid.UUID], session_id: str | None
    ) -> dict[uuid.UUID, Memory]:
        """The current versions among `memory_ids` that a query of `session_id` may see (the
        index is never the only guard): `get_many` under `visible_in_session`."""
        return await self.get_many(
            user_id,
            memory_ids,
            _memories.c.is_current,
            visible_in_session(session_id),
            *self._filtered(),
        )

    async def current_in_chain(self, user_id: str, chain_id: uuid.UUID) -> Memory | None:
        """The chain's current version (unlocked), unless the memory has expired."""
        return await self.session.scalar(
            select(Memory).where(
                Memory.user_id == user_id,
                Memory.chain_id == chain_id,
                Memory.is_current,
                unexpired(),
            )
        )

    async def chain(self, user_id: str, chain_id: uuid.UUID) -> list[Memory]:
        rows = await self.session.scalars(
            select(Memory)
            .where(Memory.user_id == user_id, Memory.chain_id == chain_id, unexpired())
            .order_by(Memory.version)
        )
        return list(rows)

    async def superseded_versions(
        self, user_id: str, chain_ids: list[uuid.UUID], session_id: str | None
    ) -> dict[uuid.UUID, list[Memory]]:
        """Earlier (non-current) versions of the given chains, newest first per chain, that a
        query of `session_id` may see: the same rule as current results (a chain can change
        scope, so an earlier CONTEXT version stays inside its session)."""
        if not chain_ids:
            return {}
        rows = await self.session.scalars(
            select(Memory)
            .where(
                Memory.user_id == user_id,
                Memory.chain_id == one_of(chain_ids),
                ~Memory.is_current,
                visible_in_session(session_id),
                unexpired(),
                *self._filtered(),
            )
            .options(*NO_VECTORS)
            .order_by(Memory.chain_id, Memory.version.desc())
        )
        by_chain: dict[uuid.UUID, list[Memory]] = {}
        for memory in rows:
            by_chain.setdefault(memory.chain_id, []).append(memory)
        return by_chain

    async def list_page(
        self,
        user_id: str,
        filters: ListFilter,
        limit: int,
        after: tuple[datetime, uuid.UUID] | None = None,
    ) -> list[Memory]:
        """Newest first; `after` is the (created_at, id) of the last row of the previous page."""
        query = _listed(user_id, filters)
        if after is not None:
            query = query.where(tuple_(Memory.created_at, Memory.id) < tuple_(*after))
        query = query.order_by(Memory.created_at.desc(), Memory.id.desc()).limit(limit)
        return list(await self.session.scalars(query))

    async def current_listed_for_update(
        self, user_id: str, filters: ListFilter, limit: int
    ) -> list[Memory]:
        """Up to `limit` current versions that the list with `filters` shows, locked for a
        write (FOR UPDATE, in id order: two such writers never deadlock)."""
        query = _listed(user_id, replace(filters, include_superseded=False))
        query = query.order_by(Memory.id).limit(limit).with_for_update()
        return list(await self.session.scalars(query))

    async def set_earlier_expiry(
        self, user_id: str, chain_id: uuid.UUID, before_version: int, expires_at: datetime | None
    ) -> None:
        """Give the chain's versions before `before_version` this expiry: a memory expires
        as a whole, so every version carries its current expiry (PATCH changes it)."""
        await self.session.execute(
            update(Memory)
            .where(
                Memory.user_id == user_id,
                Memory.chain_id == chain_id,
                Memory.version < before_version,
            )
            .values(expires_at=expires_at)
            .execution_options(synchronize_session=False)
        )

    def add(self, memories: list[Memory]) -> None:
        self.session.add_all(memories)

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

    async def has_other_languages(self, user_id: str) -> bool:
        """Whether the user has a current memory in a language of another script than Latin."""
        return bool(
            (await self.session.execute(_HAS_OTHER_LANGUAGE, {"user_id": user_id})).scalar()
        )

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
            statement = statement.where(_OTHER_LANGUAGE)
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

    async def exact_768d_cosines(
        self,
        user_id: str,
        memory_ids: list[uuid.UUID],
        query_768d: np.ndarray,
        statement: Any = _EXACT_768D_ALL,
    ) -> dict[uuid.UUID, MemoryCosines]:
        """Stage 2b, the vectors `statement` reads of each candidate: by default content,
        context and sentences (a distance the statement does not compute is None)."""
        if not memory_ids:
            return {}
        rows = await self.session.execute(
            statement, {"user_id": user_id, "ids": memory_ids, "query": query_768d}
        )

        def cosine(distance: Any) -> float | None:
            return None if distance is None else 1.0 - float(distance)

        return {
            r.id: MemoryCosines(
                content=1.0 - float(r.distance),
                context=cosine(r._mapping.get("context_distance")),
                sentence=cosine(r._mapping.get("sentence_distance")),
            )
            for r in rows
        }

    async def exact_768d_scores_with_context(
        self, user_id: str, memory_ids: list[uuid.UUID], query_768d: np.ndarray
    ) -> dict[uuid.UUID, float]:
        """Stage 2b with context: the better of the content's and the contextual text's
        exact 768D cosine (the content's alone where a memory has no context)."""
        cosines = await self.exact_768d_cosines(
            user_id, memory_ids, query_768d, _EXACT_768D_WITH_CONTEXT
        )
        return {i: c.best(context=True, sentence=False) for i, c in cosines.items()}

    async def content_vectors(self, user_id: str, memory_ids: list[uuid.UUID]) -> list[np.ndarray]:
        """The 768D content vectors of the given memories of one user (feedback lever)."""
        if not memory_ids:
            return []
        rows = await self.session.execute(
            select(Memory.embedding_768d).where(
                Memory.user_id == user_id, Memory.id == one_of(memory_ids)
            )
        )
        return [np.asarray(r[0], dtype=np.float32) for r in rows]

    async def content_sample(self, user_id: str, limit: int) -> list[str]:
        """The contents of at most `limit` of the user's current memories, in the order of
        their (random) ids: the same sample every time, until the memories change. Not
        narrowed by a search's filter: it is the user's vocabulary (specificity lever)."""
        rows = await self.session.scalars(
            select(Memory.content)
            .where(Memory.user_id == user_id, Memory.is_current, unexpired())
            .order_by(Memory.id)
            .limit(limit)
        )
        return list(rows)

    async def neighbours(
        self,
        user_id: str,
        chain_ids: list[uuid.UUID],
        followed_chain_ids: list[uuid.UUID],
        session_id: str | None,
    ) -> list[Memory]:
        """Current memories visible to the caller that follow one of `chain_ids` or are one of
        `followed_chain_ids`: the adjacent turns of the given hits."""
        if not chain_ids and not followed_chain_ids:
            return []
        rows = await self.session.scalars(
            select(Memory)
            .where(
                Memory.user_id == user_id,
                Memory.is_current,
                visible_in_session(session_id),
                unexpired(),
                *self._filtered(),
                or_(
                    Memory.chain_id == one_of(followed_chain_ids),
                    Memory.follows_chain_id == one_of(chain_ids),
                ),
            )
            .options(*NO_VECTORS)
        )
        return list(rows)

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

    async def near_duplicate_pairs(
        self, user_id: str, memory_ids: list[uuid.UUID], threshold: float
    ) -> list[tuple[uuid.UUID, uuid.UUID]]:
        """Pairs among the given memories whose 768D cosine similarity is >= threshold.

        Computed in Postgres so no vectors cross the wire."""
        if len(memory_ids) < 2:
            return []
        rows = await self.session.execute(
            _NEAR_DUPLICATE_PAIRS,
            {"user_id": user_id, "ids": memory_ids, "max_distance": 1.0 - threshold},
        )
        return [(row[0], row[1]) for row in rows]

    async def last_turns(self, user_id: str, session_ids: list[str]) -> dict[str, Turn]:
        """Per session, its current memory that no other memory follows (the turn a new one
        continues): the newest such, should a caller have broken the chain."""
        if not session_ids:
            return {}
        follower = aliased(Memory)
        rows = await self.session.execute(
            select(
                Memory.session_id,
                Memory.chain_id,
                Memory.content,
                Memory.speaker,
                Memory.context,
                Memory.scope,
            )
            .where(
                Memory.user_id == user_id,
                Memory.session_id == any_(bindparam(None, session_ids, type_=ARRAY(Text))),
                Memory.is_current,
                # An expired turn is not the context of a new one: its text would live on.
                unexpired(),
                ~exists().where(
                    follower.user_id == user_id, follower.follows_chain_id == Memory.chain_id
                ),
            )
            .order_by(Memory.session_id, Memory.created_at.desc(), Memory.id)
            .distinct(Memory.session_id)
        )
        return {
            r.session_id: Turn(r.chain_id, turn_line(r.content, r.speaker), r.context, r.scope)
            for r in rows
        }
