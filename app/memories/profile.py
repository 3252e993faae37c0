"""What the store knows about a user now: its current memories by category, each with the
version it replaced, and its latest changes. The profile endpoint shows them grouped; the
context block (app/retrieval/context.py) cites them. Both read the version chain as stored:
nothing here is derived or cached."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import ColumnElement, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import Memory
from app.memories.event_dates import event_date, event_date_sql
from app.memories.expiry import unexpired
from app.memories.repository import NO_VECTORS, ListFilter, one_of, visible_in_session


@dataclass(frozen=True, slots=True)
class Fact:
    """A current memory, the version it replaced (None: version 1, or that version is gone)
    and since when it holds."""

    memory: Memory
    replaced: Memory | None

    @property
    def since(self) -> datetime:
        """When this version's fact began: its event date (app/memories/event_dates.py) when
        the version brought one of its own (a PATCH keeps the old one otherwise), else when the
        version was written."""
        date = event_date(self.memory)
        if date is not None and (self.replaced is None or event_date(self.replaced) != date):
            return date
        return self.memory.created_at


@dataclass(frozen=True, slots=True)
class Profile:
    facts: list[Fact]  # category by category, newest first within one
    counts: dict[str, int]  # current memories per category, all of them (not only `facts`)
    last_changed_at: datetime | None  # the latest version written or ended


def _conditions(listing: ListFilter) -> list[ColumnElement[bool]]:
    given = (
        (Memory.scope, listing.scope),
        (Memory.session_id, listing.session_id),
        (Memory.category, listing.category),
    )
    conditions = [column == value for column, value in given if value is not None]
    return conditions if listing.where is None else [*conditions, listing.where]


def _since() -> ColumnElement[datetime]:
    return func.coalesce(event_date_sql(), Memory.created_at)


class ProfileRepository:
    """The profile's reads; every one is bound to a user and to `where` (a compiled filter,
    app/memories/filters/, or None)."""

    def __init__(self, session: AsyncSession, where: ColumnElement[bool] | None = None) -> None:
        self.session = session
        self.where = () if where is None else (where,)

    async def current_by_category(
        self, user_id: str, per_category: int, *conditions: ColumnElement[bool]
    ) -> list[Memory]:
        """At most `per_category` current memories of each category, newest first: the
        newest of every category, then the second newest of every category, and so on (the
        order a budget should cut in)."""
        rank = (
            func.row_number()
            .over(
                partition_by=Memory.category,
                order_by=(_since().desc(), Memory.id.desc()),
            )
            .label("rank")
        )
        ranked = (
            select(Memory.id, rank)
            .where(
                Memory.user_id == user_id, Memory.is_current, unexpired(), *conditions, *self.where
            )
            .subquery()
        )
        rows = await self.session.execute(
            select(Memory, ranked.c.rank)
            .join(ranked, ranked.c.id == Memory.id)
            .where(Memory.user_id == user_id, ranked.c.rank <= per_category)
            .options(*NO_VECTORS)
            .order_by(ranked.c.rank, _since().desc(), Memory.id.desc())
        )
        return [memory for memory, _ in rows.tuples()]

    async def latest_changes(
        self, user_id: str, limit: int, session_id: str | None
    ) -> list[Memory]:
        """Current memories that replaced an earlier version (updated, not new), latest first,
        that a query of `session_id` may see."""
        rows = await self.session.scalars(
            select(Memory)
            .where(
                Memory.user_id == user_id,
                Memory.is_current,
                Memory.version > 1,
                visible_in_session(session_id),
                unexpired(),
                *self.where,
            )
            .options(*NO_VECTORS)
            .order_by(Memory.created_at.desc(), Memory.id.desc())
            .limit(limit)
        )
        return list(rows)

    async def replaced(self, user_id: str, memories: list[Memory]) -> dict[uuid.UUID, Memory]:
        """The version each of `memories` replaced, by the replacing version's id. Not
        filtered: what a fact was before is part of the fact, whatever the filter says."""
        wanted = {m.replaces_id: m.id for m in memories if m.replaces_id is not None}
        if not wanted:
            return {}
        rows = await self.session.scalars(
            select(Memory)
            .where(Memory.user_id == user_id, Memory.id == one_of(list(wanted)), unexpired())
            .options(*NO_VECTORS)
        )
        return {wanted[m.id]: m for m in rows}

    async def counts(self, user_id: str, *conditions: ColumnElement[bool]) -> dict[str, int]:
        rows = await self.session.execute(
            select(Memory.category, func.count())
            .where(
                Memory.user_id == user_id, Memory.is_current, unexpired(), *conditions, *self.where
            )
            .group_by(Memory.category)
            .order_by(Memory.category)
        )
        return {category: count for category, count in rows.tuples()}

    async def last_changed_at(
        self, user_id: str, *conditions: ColumnElement[bool]
    ) -> datetime | None:
        """The latest version written or ended (updated, deleted) among the matching ones."""
        return await self.session.scalar(
            select(func.max(func.greatest(Memory.created_at, Memory.superseded_at))).where(
                Memory.user_id == user_id, *conditions, *self.where
            )
        )

    async def facts(self, user_id: str, memories: list[Memory]) -> list[Fact]:
        replaced = await self.replaced(user_id, memories)
        return [Fact(memory=m, replaced=replaced.get(m.id)) for m in memories]

    async def profile(self, user_id: str, per_category: int, listing: ListFilter) -> Profile:
        """Grouped by category (by name), newest first within one; `listing` as a list of
        current memories takes it (its superseded and id range are not used here)."""
        conditions = _conditions(listing)
        current = await self.current_by_category(user_id, per_category, *conditions)
        current.sort(key=lambda m: m.category)  # stable: keeps newest first within a category
        return Profile(
            facts=await self.facts(user_id, current),
            counts=await self.counts(user_id, *conditions),
            last_changed_at=await self.last_changed_at(user_id, *conditions),
        )
