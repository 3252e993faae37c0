"""Every query on memories. Each method takes the user id: isolation is structural."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

import numpy as np
from sqlalchemy import and_, delete, func, or_, select, text, tuple_
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import defer

from app.db.models import Memory, Message, OutboxEvent


@dataclass(frozen=True, slots=True)
class ListFilter:
    scope: str | None = None
    session_id: str | None = None
    category: str | None = None
    include_superseded: bool = False


@dataclass(frozen=True, slots=True)
class VectorHit:
    memory_id: uuid.UUID
    score_256d: float
    rank_256d: int
    score_768d: float


class MemoryRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def now(self) -> datetime:
        """The transaction's timestamp: every version written in it shares this instant."""
        return await self.session.scalar(select(func.now()))  # type: ignore[return-value]

    async def get(self, user_id: str, memory_id: uuid.UUID) -> Memory | None:
        return await self.session.scalar(
            select(Memory).where(Memory.user_id == user_id, Memory.id == memory_id)
        )

    async def get_for_update(self, user_id: str, memory_id: uuid.UUID) -> Memory | None:
        return await self.session.scalar(
            select(Memory)
            .where(Memory.user_id == user_id, Memory.id == memory_id)
            .with_for_update()
            # Re-read under the lock: a concurrent update may have ended this version.
            .execution_options(populate_existing=True)
        )

    async def get_many(
        self, user_id: str, memory_ids: list[uuid.UUID], with_embeddings: bool = False
    ) -> dict[uuid.UUID, Memory]:
        if not memory_ids:
            return {}
        query = select(Memory).where(Memory.user_id == user_id, Memory.id.in_(memory_ids))
        if not with_embeddings:
            # 1,024 floats a row: most of the bytes, and not needed to show a result.
            query = query.options(defer(Memory.embedding_768d), defer(Memory.embedding_256d))
        rows = await self.session.scalars(query)
        return {m.id: m for m in rows}

    async def current_in_chain(self, user_id: str, chain_id: uuid.UUID) -> Memory | None:
        return await self.session.scalar(
            select(Memory).where(
                Memory.user_id == user_id, Memory.chain_id == chain_id, Memory.is_current
            )
        )

    async def chain(self, user_id: str, chain_id: uuid.UUID) -> list[Memory]:
        rows = await self.session.scalars(
            select(Memory)
            .where(Memory.user_id == user_id, Memory.chain_id == chain_id)
            .order_by(Memory.version)
        )
        return list(rows)

    async def list_page(
        self,
        user_id: str,
        filters: ListFilter,
        limit: int,
        after: tuple[datetime, uuid.UUID] | None = None,
    ) -> list[Memory]:
        """Newest first; `after` is the (created_at, id) of the last row of the previous page."""
        query = select(Memory).where(Memory.user_id == user_id)
        if not filters.include_superseded:
            query = query.where(Memory.is_current)
        if filters.scope is not None:
            query = query.where(Memory.scope == filters.scope)
        if filters.session_id is not None:
            query = query.where(Memory.session_id == filters.session_id)
        if filters.category is not None:
            query = query.where(Memory.category == filters.category)
        if after is not None:
            query = query.where(tuple_(Memory.created_at, Memory.id) < tuple_(*after))
        query = query.order_by(Memory.created_at.desc(), Memory.id.desc()).limit(limit)
        return list(await self.session.scalars(query))

    def add(self, memories: list[Memory]) -> None:
        self.session.add_all(memories)

    async def vector_candidates(
        self,
        user_id: str,
        query_256d: np.ndarray,
        query_768d: np.ndarray,
        session_id: str | None,
        candidates_256d: int,
        candidates_768d: int,
        ef_search: int,
    ) -> list[VectorHit]:
        """Matryoshka two-stage search: 256D HNSW candidates, exact 768D cosine re-scoring."""
        # Iterative index scans keep filling the candidate list when the user filter rejects
        # neighbours (pgvector >= 0.8); for small users the planner picks the btree instead.
        await self.session.execute(text(f"SET LOCAL hnsw.ef_search = {int(ef_search)}"))
        await self.session.execute(text("SET LOCAL hnsw.iterative_scan = relaxed_order"))
        visible = Memory.scope == "USER"
        if session_id is not None:
            visible = or_(visible, and_(Memory.scope == "CONTEXT", Memory.session_id == session_id))
        distance_256 = Memory.embedding_256d.cosine_distance(query_256d)
        coarse = (
            select(
                Memory.id.label("id"),
                Memory.embedding_768d.label("embedding_768d"),
                (1 - distance_256).label("score_256d"),
            )
            .where(Memory.user_id == user_id, Memory.is_current, visible)
            .order_by(distance_256)
            .limit(candidates_256d)
            .subquery("coarse")
        )
        # The window runs over the <= 200 candidates only, after the index-ordered LIMIT.
        rank_256 = func.row_number().over(order_by=coarse.c.score_256d.desc()).label("rank_256d")
        score_768 = (1 - coarse.c.embedding_768d.cosine_distance(query_768d)).label("score_768d")
        rows = await self.session.execute(
            select(coarse.c.id, coarse.c.score_256d, rank_256, score_768)
            .order_by(score_768.desc())
            .limit(candidates_768d)
        )
        return [
            VectorHit(
                memory_id=row.id,
                score_256d=float(row.score_256d),
                rank_256d=int(row.rank_256d),
                score_768d=float(row.score_768d),
            )
            for row in rows
        ]

    async def erase_user(self, user_id: str) -> dict[str, int]:
        """Physically delete every row of this user. The only path that removes rows."""
        counts: dict[str, int] = {}
        for name, model in (("memories", Memory), ("messages", Message), ("outbox", OutboxEvent)):
            result = await self.session.execute(delete(model).where(model.user_id == user_id))
            counts[name] = int(result.rowcount or 0)  # type: ignore[attr-defined]
        return counts
