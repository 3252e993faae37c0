"""Retrieval's own vector SQL, beside the stages that use it: stage 2b's context and sentence
cosines, the feedback lever's content vectors, the specificity lever's vocabulary sample,
adjacent turns, near-duplicate pairs, and whether a user holds memories in another script.
`SearchRepository` is the memory repository a search reads through (StageContext.repository);
the vector reads ingestion shares are app/memories/vectors.py's. Every statement is bound to a
user."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import Float, any_, bindparam, exists, func, or_, select

from app.db.models import Memory
from app.memories.expiry import unexpired
from app.memories.repository import MemoryRepository
from app.memories.sql import NO_VECTORS, one_of, visible_in_session
from app.memories.vectors import IDS, MEMORIES, OTHER_LANGUAGE, QUERY_768D, exact_768d

_sentences = (
    func.unnest(MEMORIES.c.sentence_embeddings_768d).table_valued("vector").render_derived()
)


_CONTEXT_DISTANCE = MEMORIES.c.context_embedding_768d.cosine_distance(QUERY_768D).label(
    "context_distance"
)
# The nearest of the memory's sentence vectors (NULL: none, or not embedded yet).
_SENTENCE_DISTANCE = (
    select(func.min(_sentences.c.vector.op("<=>", return_type=Float)(QUERY_768D)))
    .scalar_subquery()
    .label("sentence_distance")
)
# Its sentences not embedded yet (written past COGNIS_SENTENCE_VECTORS_AT_WRITE): [] is done.
_SENTENCES_PENDING = MEMORIES.c.sentence_embeddings_768d.is_(None).label("sentences_pending")
_EXACT_768D_WITH_CONTEXT = exact_768d(_CONTEXT_DISTANCE)
_EXACT_768D_ALL = exact_768d(_CONTEXT_DISTANCE, _SENTENCE_DISTANCE, _SENTENCES_PENDING)
_HAS_OTHER_LANGUAGE = select(
    exists().where(
        MEMORIES.c.user_id == bindparam("user_id"), MEMORIES.c.is_current, OTHER_LANGUAGE
    )
)


@dataclass(frozen=True, slots=True)
class MemoryCosines:
    """A memory's exact 768D cosines to the query: its content's, its contextual text's and
    its nearest sentence's (None where it has no such vector)."""

    content: float
    context: float | None
    sentence: float | None
    sentences_pending: bool = False  # several sentences, their vectors not made yet

    def best(self, context: bool, sentence: bool) -> float:
        """The best cosine among the content's and, where asked for and present, the others'."""
        chosen = [self.content]
        if context and self.context is not None:
            chosen.append(self.context)
        if sentence and self.sentence is not None:
            chosen.append(self.sentence)
        return max(chosen)


_a, _b = MEMORIES.alias("a"), MEMORIES.alias("b")
_NEAR_DUPLICATE_PAIRS = select(_a.c.id, _b.c.id).where(
    _a.c.user_id == bindparam("user_id"),
    _b.c.user_id == bindparam("user_id"),
    _a.c.id == any_(IDS),
    _b.c.id == any_(IDS),
    _a.c.id < _b.c.id,
    _a.c.embedding_768d.cosine_distance(_b.c.embedding_768d) <= bindparam("max_distance"),
)


class SearchRepository(MemoryRepository):
    """The memory repository of a search: every read of MemoryRepository (with the search's
    filter), and retrieval's own vector reads."""

    async def has_other_languages(self, user_id: str) -> bool:
        """Whether the user has a current memory in a language of another script than Latin."""
        return bool(
            (await self.session.execute(_HAS_OTHER_LANGUAGE, {"user_id": user_id})).scalar()
        )

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
                sentences_pending=bool(r._mapping.get("sentences_pending")),
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
