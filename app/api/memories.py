"""Memory endpoints: create, batch, get, list, update, delete, history."""

from __future__ import annotations

from typing import Annotated

from litestar import Controller, delete, get, patch, post
from litestar.di import Provide
from litestar.params import Parameter

from app.api.consistency import WRITE_WAIT_HEADERS, WriteWait, provide_write_wait
from app.api.contract import COMMON, USER_WRITE, WITH_BODY, UserId, problems
from app.api.dependencies import provide_memory_service
from app.api.schemas.memories import (
    HistoryOut,
    MemoryBatchCreate,
    MemoryBatchOut,
    MemoryCreate,
    MemoryList,
    MemoryOut,
)
from app.memories.domain import MemoryDraft, MemoryUpdate, parse_memory_id
from app.memories.fields import Category, Scope, SessionId
from app.memories.repository import ListFilter
from app.memories.service import MemoryService


def _draft(body: MemoryCreate) -> MemoryDraft:
    return MemoryDraft(
        content=body.content,
        category=body.category,
        scope=body.scope,
        session_id=body.session_id,
        speaker=body.speaker,
        event_time=body.event_time,
        metadata=body.metadata,
        context=body.context,
    )


class MemoryController(Controller):
    path = "/v1/users/{user_id:str}/memories"
    tags = ["memories"]
    dependencies = {
        "service": Provide(provide_memory_service),
        "index_wait": Provide(provide_write_wait),
    }

    @post(
        "/",
        summary="Create a memory (version 1 of a new chain)",
        response_headers=WRITE_WAIT_HEADERS,
        responses=problems(*USER_WRITE),
    )
    async def create_memory(
        self, user_id: UserId, data: MemoryCreate, service: MemoryService, index_wait: WriteWait
    ) -> MemoryOut:
        (memory,) = await service.create(user_id, [_draft(data)])
        index_wait.after_commit(user_id, [memory])
        return MemoryOut.of(memory)

    @post(
        "/batch",
        summary="Create several memories in one transaction",
        response_headers=WRITE_WAIT_HEADERS,
        responses=problems(*USER_WRITE),
    )
    async def create_memories(
        self,
        user_id: UserId,
        data: MemoryBatchCreate,
        service: MemoryService,
        index_wait: WriteWait,
    ) -> MemoryBatchOut:
        memories = await service.create(user_id, [_draft(m) for m in data.memories])
        index_wait.after_commit(user_id, memories)
        return MemoryBatchOut(items=[MemoryOut.of(m) for m in memories])

    @get(
        "/",
        summary="List memories, newest first, with cursor pagination",
        responses=problems(*COMMON),
    )
    async def list_memories(
        self,
        user_id: UserId,
        service: MemoryService,
        # "scope" is Litestar's reserved name for the ASGI scope, hence the alias.
        memory_scope: Annotated[Scope | None, Parameter(query="scope")] = None,
        session_id: SessionId | None = None,
        category: Category | None = None,
        include_superseded: bool = False,
        limit: Annotated[int, Parameter(ge=1, le=200)] = 50,
        cursor: str | None = None,
    ) -> MemoryList:
        page = await service.list_page(
            user_id,
            ListFilter(
                scope=memory_scope,
                session_id=session_id,
                category=category,
                include_superseded=include_superseded,
            ),
            limit,
            cursor,
        )
        return MemoryList(items=[MemoryOut.of(m) for m in page.items], next_cursor=page.next_cursor)

    @get("/{memory_id:str}", summary="Get one memory version", responses=problems(*COMMON, 404))
    async def get_memory(
        self, user_id: UserId, memory_id: str, service: MemoryService
    ) -> MemoryOut:
        return MemoryOut.of(await service.get(user_id, parse_memory_id(memory_id)))

    @patch(
        "/{memory_id:str}",
        summary="Update: insert a new version superseding this one",
        response_headers=WRITE_WAIT_HEADERS,
        responses=problems(*WITH_BODY, 404, 409),
    )
    async def update_memory(
        self,
        user_id: UserId,
        memory_id: str,
        data: MemoryUpdate,
        service: MemoryService,
        index_wait: WriteWait,
    ) -> MemoryOut:
        memory = await service.update(user_id, parse_memory_id(memory_id), data)
        index_wait.after_commit(user_id, [memory])
        return MemoryOut.of(memory)

    @delete(
        "/{memory_id:str}",
        status_code=200,
        summary="Delete: end the current version (the row is kept in history)",
        response_headers=WRITE_WAIT_HEADERS,
        responses=problems(*COMMON, 404, 409),
    )
    async def delete_memory(
        self, user_id: UserId, memory_id: str, service: MemoryService, index_wait: WriteWait
    ) -> MemoryOut:
        memory = await service.delete(user_id, parse_memory_id(memory_id))
        index_wait.after_commit(user_id, [memory])
        return MemoryOut.of(memory)

    @get(
        "/{memory_id:str}/history",
        summary="Every version of this memory's chain, oldest first",
        responses=problems(*COMMON, 404),
    )
    async def memory_history(
        self, user_id: UserId, memory_id: str, service: MemoryService
    ) -> HistoryOut:
        versions = await service.history(user_id, parse_memory_id(memory_id))
        return HistoryOut(
            chain_id=versions[0].chain_id, versions=[MemoryOut.of(m) for m in versions]
        )
