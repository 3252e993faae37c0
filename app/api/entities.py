"""Entities: the named things of a user's memories, and the memories that name each one."""

from __future__ import annotations

import uuid
from typing import Annotated

from litestar import Controller, get
from litestar.params import Parameter

from app.api.contract import COMMON, AgentIdQuery, FiltersQuery, RunIdQuery, UserId, problems
from app.api.reads import READ_HEADERS, Reads
from app.api.schemas.entities import EntityList, EntityMemoriesOut, EntityOut, EntityType
from app.api.schemas.memories import MemoryOut
from app.db.models import Entity
from app.errors import NotFoundError
from app.memories.cursors import decode_cursor, encode_cursor, invalid_cursor
from app.memories.entities import EntityRepository
from app.memories.fields import SessionId, check_text, check_user_id
from app.memories.filters import listing_filter, to_sql


def _out(entity: Entity, memories: int) -> EntityOut:
    return EntityOut(
        id=entity.id,
        name=entity.name,
        type=entity.type,  # type: ignore[arg-type]
        aliases=list(entity.aliases),
        first_seen=entity.first_seen,
        last_seen=entity.last_seen,
        memories=memories,
    )


def _after(cursor: str) -> tuple[str, uuid.UUID]:
    key, entity_id = decode_cursor(cursor, 2)
    try:
        return key, uuid.UUID(entity_id)
    except ValueError:
        raise invalid_cursor() from None


class EntityController(Controller):
    path = "/v1/users/{user_id:str}/entities"
    tags = ["entities"]

    @get(
        "/",
        summary="The named things of the user's memories: people, places, organisations, ...",
        description="Entities found in the user's current memories by the NER model (found "
        "in the background, a moment after a write; docs/entities.md), by name, each with "
        "its aliases and how many current memories visible to this request name it. Only "
        "entities that some such memory names are listed.",
        responses=problems(*COMMON),
        response_headers=READ_HEADERS,
    )
    async def list_entities(
        self,
        user_id: UserId,
        reads: Reads,
        entity_type: Annotated[
            EntityType | None, Parameter(query="type", description="Only entities of this type.")
        ] = None,
        name: Annotated[
            str | None,
            Parameter(
                min_length=1,
                max_length=200,
                description="Only the entity with this name or alias (any case).",
            ),
        ] = None,
        agent_id: AgentIdQuery = None,
        run_id: RunIdQuery = None,
        filters: FiltersQuery = None,
        limit: Annotated[int, Parameter(ge=1, le=200)] = 50,
        cursor: Annotated[
            str | None,
            Parameter(max_length=512, description="`next_cursor` of the previous page, unchanged."),
        ] = None,
    ) -> EntityList:
        check_user_id(user_id)
        check_text(name, "name")
        after = _after(cursor) if cursor else None
        matching = listing_filter(filters, agent_id, run_id)
        where = to_sql(matching) if matching is not None else None
        page = await reads(
            lambda session: EntityRepository(session, where).page(
                user_id, entity_type, limit + 1, after, name
            ),
            fresh=True,
        )
        more = len(page) > limit
        page = page[:limit]
        last = page[-1].entity if page else None
        return EntityList(
            items=[_out(row.entity, row.memories) for row in page],
            next_cursor=encode_cursor(last.key, str(last.id)) if more and last else None,
        )

    @get(
        "/{entity_id:uuid}/memories",
        summary="The user's current memories that name an entity, newest first",
        responses=problems(*COMMON, 404),
        response_headers=READ_HEADERS,
    )
    async def entity_memories(
        self,
        user_id: UserId,
        entity_id: uuid.UUID,
        reads: Reads,
        session_id: SessionId | None = None,
        agent_id: AgentIdQuery = None,
        run_id: RunIdQuery = None,
        filters: FiltersQuery = None,
        limit: Annotated[int, Parameter(ge=1, le=200)] = 50,
    ) -> EntityMemoriesOut:
        check_user_id(user_id)
        matching = listing_filter(filters, agent_id, run_id)
        where = to_sql(matching) if matching is not None else None

        async def read(session):  # type: ignore[no-untyped-def]
            repository = EntityRepository(session, where)
            entity = await repository.get(user_id, entity_id)
            if entity is None:
                return None, 0, []
            count = await repository.count_memories(user_id, entity_id, session_id)
            found = await repository.memories_of(user_id, [entity_id], limit, session_id)
            return entity, count, found

        entity, count, memories = await reads(read, fresh=True)
        if entity is None:
            raise NotFoundError(f"entity {entity_id} not found for user {user_id}")
        return EntityMemoriesOut(
            entity=_out(entity, count),
            memories=[MemoryOut.of(m) for m in memories],
        )
