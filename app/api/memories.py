"""Memory endpoints: create, batch, get, list, update, delete, history.

A memory's id stays the same for its whole life (its first version's id, `chain_id` in SQL);
each version has an id of its own (`version_id`). Every route taking a memory id takes either:
PATCH and DELETE act on the memory's current version, optionally only while it is the one the
client read (If-Match, app/api/etags.py)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from litestar import Controller, Response, delete, get, patch, post
from litestar.di import Provide
from litestar.openapi.datastructures import ResponseSpec
from litestar.params import Parameter
from litestar.status_codes import HTTP_202_ACCEPTED

from app.api.consistency import WRITE_WAIT_HEADERS, WriteWait, provide_write_wait
from app.api.contract import (
    COMMON,
    KEYED,
    USER_WRITE,
    WITH_BODY,
    AgentIdQuery,
    FiltersQuery,
    RunIdQuery,
    UserId,
    parse_job_id,
    problems,
)
from app.api.deadlines import provide_bulk_work, provide_interactive_work
from app.api.dependencies import memory_service, provide_memory_service
from app.api.etags import (
    ETAG_HEADER,
    ETAG_HEADERS,
    IfMatch,
    etag,
    parse_if_match,
    with_etag,
)
from app.api.idempotency import REPLAY_HEADERS, IdempotentWrite, provide_idempotent_write
from app.api.reads import READ_HEADERS, Reads
from app.api.schemas.memories import (
    BatchJobOut,
    HistoryOut,
    MemoriesDeletedOut,
    MemoryBatchCreate,
    MemoryBatchOut,
    MemoryCreate,
    MemoryList,
    MemoryOut,
)
from app.db.models import Memory
from app.errors import InvalidInputError
from app.memories.domain import MemoryDraft, MemoryUpdate, id_prefix_range, parse_memory_id
from app.memories.fields import AgentId, Category, RunId, Scope, SessionId
from app.memories.filters import deletion_filter, listing_filter, to_sql
from app.memories.repository import ListFilter
from app.memories.service import MemoryService
from app.ml.scheduling.work import Work
from app.runtime import Runtime


def _draft(body: MemoryCreate) -> MemoryDraft:
    return MemoryDraft(
        content=body.content,
        category=body.category,
        scope=body.scope,
        session_id=body.session_id,
        agent_id=body.agent_id,
        run_id=body.run_id,
        speaker=body.speaker,
        event_time=body.event_time,
        metadata=body.metadata,
        context=body.context,
        expires_at=body.expires_at,
        ttl_s=body.ttl_s,
        language=body.language,
    )


def _one(memories: list[Memory]) -> MemoryOut:
    (memory,) = memories
    return MemoryOut.of(memory)


class MemoryController(Controller):
    path = "/v1/users/{user_id:str}/memories"
    tags = ["memories"]
    dependencies = {
        "service": Provide(provide_memory_service),
        "index_wait": Provide(provide_write_wait),
        "work": Provide(provide_interactive_work),
        "idempotency": Provide(provide_idempotent_write),
    }

    @post(
        "/",
        summary="Create a memory (version 1 of a new chain)",
        description="Its `id` is the memory's for good: later updates and the delete keep it.",
        response_headers=WRITE_WAIT_HEADERS + REPLAY_HEADERS + ETAG_HEADERS,
        responses=problems(*USER_WRITE, *KEYED),
    )
    async def create_memory(
        self,
        user_id: UserId,
        data: MemoryCreate,
        service: MemoryService,
        index_wait: WriteWait,
        work: Work,
        idempotency: IdempotentWrite,
    ) -> Response[MemoryOut]:
        return with_etag(
            await idempotency.respond(
                lambda: service.create(user_id, [_draft(data)], work), _one, index_wait
            )
        )

    @post(
        "/batch",
        summary="Create several memories in one transaction (or, past the deadline, in a job)",
        description="201: the memories are written. 202: they need more model time than this "
        "request's deadline (COGNIS_BULK_WRITE_DEADLINE_MS, or a shorter "
        "X-Cognis-Deadline-Ms), so the batch, validated, is kept as a job that a worker "
        "writes later, in one transaction as a 201 would; read it at the Location "
        "(`GET .../memories/batch/jobs/{job_id}`) until its status is done (its `items` are "
        "then what the 201 would have listed) or failed. A batch within the published maximum "
        "is never refused for its size.",
        dependencies={"work": Provide(provide_bulk_work)},
        response_headers=WRITE_WAIT_HEADERS + REPLAY_HEADERS,
        responses={
            HTTP_202_ACCEPTED: ResponseSpec(
                data_container=BatchJobOut,
                description="Too much model work for the deadline: accepted as a job, written "
                "later. `Location`: the job. With ?wait_for=indexed, `X-Index-State: pending`.",
                generate_examples=False,
            ),
            **problems(*USER_WRITE, *KEYED),
        },
    )
    async def create_memories(
        self,
        user_id: UserId,
        data: MemoryBatchCreate,
        service: MemoryService,
        index_wait: WriteWait,
        work: Work,
        idempotency: IdempotentWrite,
        runtime: Runtime,
    ) -> Response[MemoryBatchOut]:
        idempotency.jobs_path = f"{self.path.replace('{user_id:str}', user_id)}/batch/jobs"
        response = await idempotency.respond(
            lambda: service.create_or_queue(user_id, [_draft(m) for m in data.memories], work),
            lambda memories: MemoryBatchOut(items=[MemoryOut.of(m) for m in memories]),
            index_wait,
        )
        if response.status_code == HTTP_202_ACCEPTED:
            runtime.batch_worker.wake()  # this process's worker, if it runs one
        return response

    @get(
        "/batch/jobs/{job_id:str}",
        summary="A batch create's job: its status and, when done, the memories it wrote",
        responses=problems(*COMMON, 404),
        response_headers=READ_HEADERS,
    )
    async def get_batch_job(
        self, user_id: UserId, job_id: str, reads: Reads, runtime: Runtime
    ) -> BatchJobOut:
        wanted = parse_job_id(job_id)
        job, written = await reads(
            lambda session: memory_service(session, runtime).batch_job(user_id, wanted),
            fresh=True,
        )
        return BatchJobOut.of(job, written)

    @get(
        "/",
        summary="List memories, newest first, with cursor pagination",
        responses=problems(*COMMON),
        response_headers=READ_HEADERS,
    )
    async def list_memories(
        self,
        user_id: UserId,
        reads: Reads,
        runtime: Runtime,
        # "scope" is Litestar's reserved name for the ASGI scope, hence the alias.
        memory_scope: Annotated[Scope | None, Parameter(query="scope")] = None,
        session_id: SessionId | None = None,
        agent_id: AgentIdQuery = None,
        run_id: RunIdQuery = None,
        category: Category | None = None,
        include_superseded: bool = False,
        limit: Annotated[int, Parameter(ge=1, le=200)] = 50,
        cursor: str | None = None,
        filters: FiltersQuery = None,
        id_prefix: Annotated[
            str | None,
            Parameter(
                description="Only memories whose id starts with these hex digits (4 to 32, "
                "dashes ignored): finds the memory a short id names, e.g. `3fa85f64`."
            ),
        ] = None,
    ) -> MemoryList:
        matching = listing_filter(filters, agent_id, run_id)
        listing = ListFilter(
            scope=memory_scope,
            session_id=session_id,
            category=category,
            include_superseded=include_superseded,
            where=to_sql(matching) if matching is not None else None,
            id_range=id_prefix_range(id_prefix) if id_prefix is not None else None,
        )
        page = await reads(
            lambda session: memory_service(session, runtime).list_page(
                user_id, listing, limit, cursor
            ),
            fresh=True,
        )
        return MemoryList(items=[MemoryOut.of(m) for m in page.items], next_cursor=page.next_cursor)

    @delete(
        "/",
        status_code=200,
        summary="Delete every memory a filter keeps: end their current versions (history kept)",
        description="What a DELETE of each would do, in one transaction: every current memory "
        "the filters keep has its current version ended (it leaves lists and searches; GET by "
        "its id reads its last version and `/history` every version). The filters are the "
        "list's, except `agent_id` and `run_id`: here exactly that agent's or run's memories, "
        "not the user's shared ones too (a list's `filters` with `agent eq A` shows the same "
        "set first). Without any filter, `all=true` is required: then every memory of the "
        "user. Nothing is removed: `DELETE /v1/users/{user_id}` erases.",
        response_headers=WRITE_WAIT_HEADERS + REPLAY_HEADERS,
        responses=problems(*COMMON, *KEYED),
    )
    async def delete_memories(
        self,
        user_id: UserId,
        service: MemoryService,
        index_wait: WriteWait,
        idempotency: IdempotentWrite,
        memory_scope: Annotated[Scope | None, Parameter(query="scope")] = None,
        session_id: SessionId | None = None,
        agent_id: Annotated[
            AgentId | None,
            Parameter(description="Only this agent's memories (not the shared ones)."),
        ] = None,
        run_id: Annotated[
            RunId | None,
            Parameter(description="Only this run's memories (not those of no run)."),
        ] = None,
        category: Category | None = None,
        filters: FiltersQuery = None,
        every: Annotated[
            bool,
            Parameter(
                query="all",
                description="Delete every memory of the user: required when no filter is "
                "given, so that a request whose memory id went missing "
                "(`DELETE .../memories/`) ends nothing.",
            ),
        ] = False,
    ) -> Response[MemoriesDeletedOut]:
        kept = deletion_filter(filters, agent_id, run_id)
        listing = ListFilter(
            scope=memory_scope,
            session_id=session_id,
            category=category,
            where=to_sql(kept) if kept is not None else None,
        )
        if not every and kept is None and (memory_scope, session_id, category) == (None,) * 3:
            raise InvalidInputError(
                "give a filter (scope, session_id, agent_id, run_id, category or filters), or "
                "all=true to delete every memory of the user",
                field="all",
            )

        async def delete_all() -> list[Memory]:
            return await service.delete_all(user_id, listing)

        return await idempotency.respond(
            delete_all, lambda ended: MemoriesDeletedOut.of(user_id, ended), index_wait
        )

    @get(
        "/{memory_id:str}",
        summary="Get a memory (its current version), or one version by its version id",
        description="By the memory's id: its current version; once it is deleted, its last "
        "version (`is_current` false, `superseded_at` set: the memory is gone from lists "
        "and searches, its history stays). By a version's id: that version, current or not "
        "(the first version's id is the memory's id, so version 1 of a memory updated since "
        "is read in its history). The ETag is the version's id, for If-Match.",
        responses=problems(*COMMON, 404),
        response_headers=READ_HEADERS + ETAG_HEADERS,
    )
    async def get_memory(
        self, user_id: UserId, memory_id: str, reads: Reads, runtime: Runtime
    ) -> Response[MemoryOut]:
        wanted = parse_memory_id(memory_id)
        memory = await reads(
            lambda session: memory_service(session, runtime).get(user_id, wanted), fresh=True
        )
        return Response(MemoryOut.of(memory), headers={ETAG_HEADER: etag(memory.id)})

    @patch(
        "/{memory_id:str}",
        summary="Update a memory: a new version supersedes its current one",
        description="`memory_id`: the memory's id, or any of its versions' ids (an id kept "
        "from before an update still names the memory). The new version keeps the memory's "
        "`id` and gets a `version_id` of its own (the response's ETag). Fields left out keep "
        "their values. With If-Match, 412 unless the current version is the one named. 409: "
        "the memory is deleted.",
        response_headers=WRITE_WAIT_HEADERS + REPLAY_HEADERS + ETAG_HEADERS,
        responses=problems(*WITH_BODY, 404, 409, 412, *KEYED),
    )
    async def update_memory(
        self,
        user_id: UserId,
        memory_id: str,
        data: MemoryUpdate,
        service: MemoryService,
        index_wait: WriteWait,
        work: Work,
        idempotency: IdempotentWrite,
        if_match: IfMatch = None,
    ) -> Response[MemoryOut]:
        wanted, expected = parse_memory_id(memory_id), parse_if_match(if_match)

        async def update() -> list[Memory]:
            return [
                await service.update(user_id, wanted, data, work=work, expected_versions=expected)
            ]

        return with_etag(await idempotency.respond(update, _one, index_wait))

    @delete(
        "/{memory_id:str}",
        status_code=200,
        summary="Delete a memory: end its current version (kept in its history)",
        description="`memory_id`: the memory's id, or any of its versions' ids. The response "
        "is the ended version. With If-Match, 412 unless the current version is the one "
        "named. 409: the memory is deleted already.",
        response_headers=WRITE_WAIT_HEADERS + REPLAY_HEADERS + ETAG_HEADERS,
        responses=problems(*COMMON, 404, 409, 412, *KEYED),
    )
    async def delete_memory(
        self,
        user_id: UserId,
        memory_id: str,
        service: MemoryService,
        index_wait: WriteWait,
        idempotency: IdempotentWrite,
        event_end: Annotated[
            datetime | None,
            Parameter(
                description="When the fact ended in the world (ISO 8601 with an offset). "
                "Omitted: the memory is retracted, and nothing is said about the world."
            ),
        ] = None,
        if_match: IfMatch = None,
    ) -> Response[MemoryOut]:
        wanted, expected = parse_memory_id(memory_id), parse_if_match(if_match)

        async def delete() -> list[Memory]:
            return [await service.delete(user_id, wanted, event_end, expected_versions=expected)]

        return with_etag(await idempotency.respond(delete, _one, index_wait))

    @get(
        "/{memory_id:str}/history",
        summary="Every version of a memory, oldest first",
        description="`memory_id`: the memory's id or any of its versions' ids: the same "
        "history either way.",
        responses=problems(*COMMON, 404),
        response_headers=READ_HEADERS,
    )
    async def memory_history(
        self, user_id: UserId, memory_id: str, reads: Reads, runtime: Runtime
    ) -> HistoryOut:
        wanted = parse_memory_id(memory_id)
        versions = await reads(
            lambda session: memory_service(session, runtime).history(user_id, wanted), fresh=True
        )
        chain_id = versions[0].chain_id
        return HistoryOut(
            id=chain_id, chain_id=chain_id, versions=[MemoryOut.of(m) for m in versions]
        )
