"""Every query on memories. Each method takes the user id: isolation is structural."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

import numpy as np
from sqlalchemy import and_, delete, func, or_, select, text, tuple_
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased, defer

from app.db.models import Memory, Message, OutboxEvent


@dataclass(frozen=True, slots=True)
class ListFilter:
    scope: str | None = None
    session_id: str | None = None
    category: str | None = None
    include_superseded: bool = False


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

    async def get_many(self, user_id: str, memory_ids: list[uuid.UUID]) -> dict[uuid.UUID, Memory]:
        """Rows to show, without their embeddings (1,024 floats a row: most of the bytes)."""
        if not memory_ids:
            return {}
        rows = await self.session.scalars(
            select(Memory)
            .where(Memory.user_id == user_id, Memory.id.in_(memory_ids))
            .options(defer(Memory.embedding_768d), defer(Memory.embedding_256d))
        )
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

    async def superseded_versions(
        self, user_id: str, chain_ids: list[uuid.UUID]
    ) -> dict[uuid.UUID, list[Memory]]:
        """Earlier (non-current) versions of the given chains, newest first per chain."""
        if not chain_ids:
            return {}
        rows = await self.session.scalars(
            select(Memory)
            .where(Memory.user_id == user_id, Memory.chain_id.in_(chain_ids), ~Memory.is_current)
            .options(defer(Memory.embedding_768d), defer(Memory.embedding_256d))
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

    async def coarse_candidates(
        self,
        user_id: str,
        query_256d: np.ndarray,
        session_id: str | None,
        limit: int,
        ef_search: int,
    ) -> list[tuple[uuid.UUID, float]]:
        """Stage 2a: the user's visible current memories nearest by 256D cosine (HNSW)."""
        # Iterative index scans keep filling the candidate list when the user filter rejects
        # neighbours (pgvector >= 0.8); for small users the planner picks the btree instead.
        await self.session.execute(text(f"SET LOCAL hnsw.ef_search = {int(ef_search)}"))
        await self.session.execute(text("SET LOCAL hnsw.iterative_scan = relaxed_order"))
        visible = Memory.scope == "USER"
        if session_id is not None:
            visible = or_(visible, and_(Memory.scope == "CONTEXT", Memory.session_id == session_id))
        distance = Memory.embedding_256d.cosine_distance(query_256d)
        rows = await self.session.execute(
            select(Memory.id, (1 - distance).label("score"))
            .where(Memory.user_id == user_id, Memory.is_current, visible)
            .order_by(distance)
            .limit(limit)
        )
        # relaxed_order may return neighbours slightly out of order: sort exactly here.
        return sorted(((r.id, float(r.score)) for r in rows), key=lambda pair: -pair[1])

    async def exact_768d_scores(
        self, user_id: str, memory_ids: list[uuid.UUID], query_768d: np.ndarray
    ) -> dict[uuid.UUID, float]:
        """Stage 2b: exact 768D cosine for the given candidates (computed in Postgres)."""
        if not memory_ids:
            return {}
        score = 1 - Memory.embedding_768d.cosine_distance(query_768d)
        rows = await self.session.execute(
            select(Memory.id, score.label("score")).where(
                Memory.user_id == user_id, Memory.id.in_(memory_ids)
            )
        )
        return {r.id: float(r.score) for r in rows}

    async def near_duplicate_pairs(
        self, user_id: str, memory_ids: list[uuid.UUID], threshold: float
    ) -> list[tuple[uuid.UUID, uuid.UUID]]:
        """Pairs among the given memories whose 768D cosine similarity is >= threshold.

        Computed in Postgres so no vectors cross the wire."""
        if len(memory_ids) < 2:
            return []
        a, b = aliased(Memory), aliased(Memory)
        similarity = 1 - a.embedding_768d.cosine_distance(b.embedding_768d)
        rows = await self.session.execute(
            select(a.id, b.id).where(
                a.user_id == user_id,
                b.user_id == user_id,
                a.id.in_(memory_ids),
                b.id.in_(memory_ids),
                a.id < b.id,
                similarity >= threshold,
            )
        )
        return [(row[0], row[1]) for row in rows]

    async def erase_user(self, user_id: str) -> dict[str, int]:
        """Physically delete every row of this user. The only path that removes rows."""
        counts: dict[str, int] = {}
        for name, model in (("memories", Memory), ("messages", Message), ("outbox", OutboxEvent)):
            result = await self.session.execute(delete(model).where(model.user_id == user_id))
            counts[name] = int(result.rowcount or 0)  # type: ignore[attr-defined]
        return counts
