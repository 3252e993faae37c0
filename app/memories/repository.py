"""Every query on memories but the vector ones (app/memories/vectors.py, and retrieval's own in
app/retrieval/vector_sql.py). Each method takes the user id: isolation is structural."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace
from datetime import datetime

from sqlalchemy import (
    ColumnElement,
    Select,
    Text,
    any_,
    bindparam,
    exists,
    func,
    or_,
    select,
    tuple_,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased

from app.db.models import Memory
from app.memories.context import Turn, turn_line
from app.memories.expiry import unexpired
from app.memories.sql import NO_VECTORS, one_of, visible_in_session
from app.memories.vectors import NearestMemories

# What other modules read from here: the pieces live in app/memories/sql.py.
__all__ = [
    "NO_VECTORS",
    "ListFilter",
    "MemoryRepository",
    "one_of",
    "visible_in_session",
]


@dataclass(frozen=True, slots=True)
class ListFilter:
    scope: str | None = None
    session_id: str | None = None
    category: str | None = None
    include_superseded: bool = False
    where: ColumnElement[bool] | None = None  # a compiled filter (app/memories/filters/)
    # Ids from .. to (inclusive): those starting with a short id's digits (id_prefix_range),
    # a memory's id or a version's.
    id_range: tuple[uuid.UUID, uuid.UUID] | None = None


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


class MemoryRepository(NearestMemories):
    def __init__(self, session: AsyncSession, where: ColumnElement[bool] | None = None) -> None:
        """`where`: a search's filter (app/memories/filters/, compiled): every read that
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
            Memory.__table__.c.is_current,
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
