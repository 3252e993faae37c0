"""Reads of a user's entities (0039, docs/entities.md): pages of them with how many of the
reader's memories name each, an entity's memories, and the entities a search's names match.
Every read is bound to a user; memories only current, unexpired and visible in the session.
The entities themselves are found and stored by app/memories/entities.py."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Text,
    any_,
    bindparam,
    cast,
    func,
    or_,
    select,
    tuple_,
)
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import Entity, Memory, MemoryEntity
from app.memories.expiry import unexpired
from app.memories.repository import NO_VECTORS, one_of, visible_in_session


@dataclass(frozen=True, slots=True)
class EntityRow:
    entity: Entity
    memories: int  # current memories that name it (visible to the reader)


def _memory_conditions(
    user_id: str, session_id: str | None, where: ColumnElement[bool] | None
) -> list[ColumnElement[bool]]:
    conditions: list[ColumnElement[bool]] = [
        Memory.user_id == user_id,
        Memory.__table__.c.is_current,
        unexpired(),
        visible_in_session(session_id),
    ]
    return conditions if where is None else [*conditions, where]


class EntityRepository:
    def __init__(self, session: AsyncSession, where: ColumnElement[bool] | None = None) -> None:
        """`where`: a compiled filter (app/memories/filters/) over the memories counted."""
        self.session = session
        self.where = where

    async def page(
        self,
        user_id: str,
        entity_type: str | None,
        limit: int,
        after: tuple[str, uuid.UUID] | None,
        name: str | None = None,
    ) -> list[EntityRow]:
        """The user's entities that name at least one visible current memory, by name, after
        the cursor's (key, id)."""
        counted = (
            select(MemoryEntity.entity_id, func.count().label("memories"))
            .join(Memory, Memory.id == MemoryEntity.memory_id)
            .where(MemoryEntity.user_id == user_id, *_memory_conditions(user_id, None, self.where))
            .group_by(MemoryEntity.entity_id)
            .subquery()
        )
        query = (
            select(Entity, counted.c.memories)
            .join(counted, counted.c.entity_id == Entity.id)
            .where(Entity.user_id == user_id)
            .order_by(Entity.key, Entity.id)
            .limit(limit)
        )
        if entity_type is not None:
            query = query.where(Entity.type == entity_type)
        if name is not None:
            query = query.where(named_as(name))
        if after is not None:
            query = query.where(tuple_(Entity.key, Entity.id) > tuple_(*after))
        rows = await self.session.execute(query)
        return [EntityRow(entity, count) for entity, count in rows.tuples()]

    async def get(self, user_id: str, entity_id: uuid.UUID) -> Entity | None:
        return await self.session.scalar(
            select(Entity).where(Entity.user_id == user_id, Entity.id == entity_id)
        )

    async def memories_of(
        self, user_id: str, entity_ids: Sequence[uuid.UUID], limit: int, session_id: str | None
    ) -> list[Memory]:
        """The visible current memories that name any of the entities, newest first."""
        if not entity_ids:
            return []
        linked = select(MemoryEntity.memory_id).where(
            MemoryEntity.user_id == user_id, MemoryEntity.entity_id == one_of(list(entity_ids))
        )
        rows = await self.session.scalars(
            select(Memory)
            .where(Memory.id.in_(linked), *_memory_conditions(user_id, session_id, self.where))
            .options(*NO_VECTORS)
            .order_by(Memory.created_at.desc(), Memory.id.desc())
            .limit(limit)
        )
        return list(rows)

    async def count_memories(
        self, user_id: str, entity_id: uuid.UUID, session_id: str | None = None
    ) -> int:
        """How many visible current memories name the entity."""
        linked = select(MemoryEntity.memory_id).where(
            MemoryEntity.user_id == user_id, MemoryEntity.entity_id == entity_id
        )
        counted = await self.session.scalar(
            select(func.count())
            .select_from(Memory)
            .where(Memory.id.in_(linked), *_memory_conditions(user_id, session_id, self.where))
        )
        return int(counted or 0)

    async def named(
        self, user_id: str, names: Sequence[str], max_memories: int | None = None
    ) -> list[uuid.UUID]:
        """The user's entities any of `names` names (its name or an alias, any case); with
        `max_memories`, only those named by at most that many of the user's links."""
        if not names:
            return []
        query = select(Entity.id).where(Entity.user_id == user_id, _any_named(names))
        if max_memories is not None:
            query = query.where(_links(user_id, Entity.id) <= max_memories)
        return list(await self.session.scalars(query))

    async def entities_of(
        self, user_id: str, memory_ids: Sequence[uuid.UUID], max_memories: int
    ) -> dict[uuid.UUID, list[uuid.UUID]]:
        """The entities each memory version names, leaving out those named by more than
        `max_memories` of the user's links (a name on every page links nothing)."""
        if not memory_ids:
            return {}
        degree = (
            select(MemoryEntity.entity_id, func.count().label("links"))
            .where(MemoryEntity.user_id == user_id)
            .group_by(MemoryEntity.entity_id)
            .subquery()
        )
        rows = await self.session.execute(
            select(MemoryEntity.memory_id, MemoryEntity.entity_id)
            .join(degree, degree.c.entity_id == MemoryEntity.entity_id)
            .where(
                MemoryEntity.user_id == user_id,
                MemoryEntity.memory_id == one_of(list(memory_ids)),
                degree.c.links <= max_memories,
            )
        )
        found: dict[uuid.UUID, list[uuid.UUID]] = {}
        for memory_id, entity_id in rows.tuples():
            found.setdefault(memory_id, []).append(entity_id)
        return found

    async def linked(
        self,
        user_id: str,
        entity_ids: Sequence[uuid.UUID],
        session_id: str | None,
        exclude: Sequence[uuid.UUID],
        limit: int,
    ) -> list[tuple[Memory, list[uuid.UUID]]]:
        """Visible current memories that name any of the entities and are not in `exclude`,
        those naming the most of them first, then the newest; with the entities each names."""
        if not entity_ids:
            return []
        links = await self.session.execute(
            select(MemoryEntity.memory_id, MemoryEntity.entity_id).where(
                MemoryEntity.user_id == user_id,
                MemoryEntity.entity_id == one_of(list(entity_ids)),
            )
        )
        named: dict[uuid.UUID, list[uuid.UUID]] = {}
        excluded = set(exclude)
        for memory_id, entity_id in links.tuples():
            if memory_id not in excluded:
                named.setdefault(memory_id, []).append(entity_id)
        if not named:
            return []
        rows = await self.session.scalars(
            select(Memory)
            .where(
                Memory.id == one_of(list(named)),
                *_memory_conditions(user_id, session_id, self.where),
            )
            .options(*NO_VECTORS)
        )
        memories = sorted(rows, key=lambda m: (-len(named[m.id]), -m.created_at.timestamp()))
        return [(m, named[m.id]) for m in memories[:limit]]


def _links(user_id: str, entity_id: Any) -> Any:
    """SQL: how many memory versions of the user name the entity."""
    return (
        select(func.count())
        .where(MemoryEntity.user_id == user_id, MemoryEntity.entity_id == entity_id)
        .scalar_subquery()
    )


def _any_named(names: Sequence[str]) -> ColumnElement[bool]:
    lowered = sorted({n.lower() for n in names})
    given = bindparam(None, lowered, type_=ARRAY(Text))
    aliases = cast(func.lower(cast(Entity.aliases, Text)), ARRAY(Text))
    return or_(Entity.key == any_(given), aliases.op("&&")(given))


def named_as(name: str) -> ColumnElement[bool]:
    """SQL: the entity is called `name` (its name or an alias, any case)."""
    return _any_named([name])
