"""mem0's Platform API, as its official client (`mem0ai`'s MemoryClient) calls it: each route
translates the call to this service's own services (memories, ingestion, search) and their
answer to mem0's shapes; nothing here stores, extracts or ranks by itself. docs/mem0.md says
what maps to what.

mem0's client authenticates with `Authorization: Token <key>`: a key of this service, bound to
its tenant like any other spelling of it (app/tenants/authentication.py)."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from litestar import Controller, Request, Response, delete, get, post, put
from litestar.di import Provide
from litestar.openapi.datastructures import ResponseSpec
from litestar.params import Parameter
from litestar.status_codes import HTTP_200_OK, HTTP_202_ACCEPTED
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from app.api.contract import COMMON, USER_WRITE, problems
from app.api.deadlines import DEADLINE_HEADER, DEADLINE_SCHEMA, MAX_DEADLINE_MS, write_work
from app.api.dependencies import memory_service, provide_ingest_service, provide_memory_service
from app.api.mem0 import openapi as bodies_doc
from app.api.mem0.bodies import (
    batch_items,
    body_of,
    content_of,
    converted,
    item_memory_id,
    scoped_body,
    sent_at_of,
    text_field,
)
from app.api.mem0.refusals import MEM0_HANDLERS
from app.api.mem0.scores import relevance_floor, score_of
from app.api.mem0.translate import expiration, history_out, memory_out
from app.api.memories import _draft
from app.api.messages import _incoming
from app.api.reads import Reads
from app.api.schemas.memories import MemoryCreate, MemoryOut
from app.api.schemas.messages import MessageIn
from app.api.schemas.search import SearchBody
from app.api.search import search_user
from app.db.models import Memory
from app.db.tenant import current_tenant
from app.errors import InvalidInputError, NotFoundError
from app.ingest.cancel import cancel_queued
from app.ingest.service import IngestService, JobView
from app.memories.domain import MemoryUpdate, parse_memory_id
from app.memories.filters import all_of, deletion_filter, parse_filter, to_sql, visible_to
from app.memories.repository import ListFilter
from app.memories.service import MemoryService
from app.ml.scheduling.work import Work, WorkClass
from app.runtime import Runtime

COMMON_PROBLEMS = problems(*USER_WRITE, 404)
Mem0MemoryId = Annotated[str, bodies_doc.MEMORY_ID_PARAMETER]
# The client's deadline, as on the native writes; refused here with 429 (app/api/mem0/refusals.py).
Mem0Deadline = Annotated[
    str | None,
    Parameter(
        header=DEADLINE_HEADER,
        schema_extra=DEADLINE_SCHEMA,
        description=f"Milliseconds this client will wait (1-{MAX_DEADLINE_MS}). A write that "
        "cannot be done within them (nor within the server's own deadline) is refused with "
        "429 and Retry-After, and nothing of it is written.",
    ),
]
# mem0's page size when get_all names none, and the listing's page here.
DEFAULT_PAGE_SIZE = 100
_LIST_PAGE = 200


def mem0_memory(memory: Memory) -> dict[str, Any]:
    return memory_out(MemoryOut.of(memory))


def _work(runtime: Runtime, user_id: str, deadline_ms: str | None = None) -> Work:
    """An interactive write's model work: the server's deadline, or the client's shorter
    X-Cognis-Deadline-Ms (an httpx client given to mem0's MemoryClient can send it)."""
    return write_work(
        WorkClass.INTERACTIVE, user_id, runtime.settings.api.write_deadline_ms, deadline_ms
    )


def _queued(job_id: uuid.UUID, message: str) -> Response[dict[str, Any]]:
    """mem0's answer to an add whose processing is queued (its async mode's): 202, the job
    as the event to follow (GET /v1/users/{user}/jobs/{event_id})."""
    event = {"message": message, "status": "PENDING", "event_id": str(job_id)}
    return Response({"results": [event]}, status_code=HTTP_202_ACCEPTED)


def _failed(view: JobView) -> dict[str, Any]:
    """A job that failed for good, as mem0's event of it: never an empty success."""
    errors = sorted({t.last_error for t in view.tasks if t.last_error})
    message = "processing these messages failed" + (f": {'; '.join(errors)}" if errors else "")
    return {"results": [{"message": message, "status": "FAILED", "event_id": str(view.job_id)}]}


def _event(memory_id: uuid.UUID, content: str, event: str) -> dict[str, Any]:
    return {"id": str(memory_id), "memory": content, "event": event}


async def _owner(session: AsyncSession, memory_id: uuid.UUID) -> str:
    """The user whose memory an id names (the memory's or one of its versions'), in the
    key's tenant (row security hides every other tenant's): mem0's by-id calls name no user."""
    owner = await session.scalar(select(Memory.user_id).where(Memory.id == memory_id).limit(1))
    if owner is None:
        raise NotFoundError(f"memory {memory_id} not found")
    return owner


async def _update(
    service: MemoryService, runtime: Runtime, memory_id: str, change: dict[str, Any]
) -> Memory:
    """mem0's update (text, metadata, expiration_date) as a new version of the memory."""
    fields: dict[str, Any] = {}
    if "text" in change and change["text"] is not None:
        fields["content"] = change["text"]
    if "metadata" in change and change["metadata"] is not None:
        fields["metadata"] = change["metadata"]
    changes = converted(fields, MemoryUpdate)
    if "expiration_date" in change:
        changes.expires_at = expiration(change["expiration_date"])
    wanted = parse_memory_id(memory_id)
    user_id = await _owner(service.repository.session, wanted)
    # The service acts on the memory's current version (MemoryService.current): 409 once the
    # memory is deleted.
    return await service.update(user_id, wanted, changes, work=_work(runtime, user_id))


async def _delete(service: MemoryService, memory_id: str) -> None:
    wanted = parse_memory_id(memory_id)
    await service.delete(await _owner(service.repository.session, wanted), wanted)


class Mem0Controller(Controller):
    """The routes of mem0's client: /v1/ping, /v3/memories/..., /v1/memories/..., /v1/batch."""

    path = "/"
    tags = ["mem0 compatibility"]
    dependencies = {
        "service": Provide(provide_memory_service),
        "ingest": Provide(provide_ingest_service),
    }
    # A write refused for load is a 429 with Retry-After here: what mem0's client surfaces.
    exception_handlers = MEM0_HANDLERS

    @get(
        "/v1/ping",
        summary="mem0: check the key (its tenant as org and project)",
        responses=problems(*COMMON),
    )
    async def ping(self) -> dict[str, Any]:
        tenant = str(current_tenant())
        return {"status": "ok", "org_id": tenant, "project_id": tenant, "user_email": None}

    @post(
        "/v3/memories/add",
        status_code=200,
        summary="mem0: add messages (infer: through ingestion; else stored as given)",
        description="200 with the events of what was added; 202 with a PENDING event (the "
        "job's id as `event_id`) when the messages are queued: `async_mode`, or their "
        "processing not finished within COGNIS_INGEST_WAIT_TIMEOUT_S.",
        responses={
            HTTP_202_ACCEPTED: ResponseSpec(
                data_container=dict[str, Any],
                description='Queued, not yet processed: `{"results": [{"message", '
                '"status": "PENDING", "event_id"}]}`; the event id is the job\'s.',
                generate_examples=False,
            ),
            **COMMON_PROBLEMS,
            **problems(429),
        },
    )
    async def add(
        self,
        data: Annotated[Any, bodies_doc.ADD],
        service: MemoryService,
        ingest: IngestService,
        runtime: Runtime,
        deadline_ms: Mem0Deadline = None,
    ) -> Response[dict[str, Any]]:
        body, user_id, _ = scoped_body(data)
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise InvalidInputError("messages must be a non-empty list", field="messages")
        shared = {
            "metadata": body.get("metadata") or {},
            "agent_id": body.get("agent_id"),
            "run_id": body.get("run_id"),
        }
        work = _work(runtime, user_id, deadline_ms)
        if body.get("infer", True) is False:
            # Stored as written, as POST /memories stores them (its schema checks them).
            drafts = [
                _draft(
                    converted(
                        {
                            **shared,
                            "content": content_of(m),
                            "expires_at": expiration(body.get("expiration_date")),
                        },
                        MemoryCreate,
                    )
                )
                for m in messages
                if not (isinstance(m, dict) and m.get("role") == "system")
            ]
            written = await service.create(user_id, drafts, work)
            events = [_event(m.chain_id, m.content, "ADD") for m in written]
            return Response({"results": events}, status_code=HTTP_200_OK)
        sent_at = sent_at_of(body.get("timestamp"))
        incoming = [
            _incoming(
                converted(
                    {
                        **shared,
                        "content": content_of(m),
                        "role": m.get("role", "user") if isinstance(m, dict) else "user",
                        "timestamp": sent_at,
                    },
                    MessageIn,
                )
            )
            for m in messages
        ]
        # As POST /messages: step 1 committed by the service before any slow work.
        job_id, _ = await ingest.submit(user_id, incoming, work)
        if body.get("async_mode") is True:
            return _queued(job_id, "Memory processing has been queued for background execution")
        view = await ingest.wait_for_job(user_id, job_id)
        if view.state == "failed":
            return Response(_failed(view), status_code=HTTP_200_OK)
        if view.state != "done":
            # Saved and queued, not yet applied: its event, never an empty success.
            return _queued(
                job_id,
                "Memory processing is queued and has not finished yet; the memories appear "
                "once it has (follow the event_id)",
            )
        events = await _events(service, user_id, view.decisions)
        return Response({"results": events}, status_code=HTTP_200_OK)

    @post(
        "/v3/memories",
        status_code=200,
        summary="mem0: list a user's memories, newest first (page, page_size)",
        responses=COMMON_PROBLEMS,
    )
    async def get_all(
        self,
        data: Annotated[Any, bodies_doc.LIST],
        reads: Reads,
        runtime: Runtime,
        page: int = Parameter(default=1, ge=1),
        page_size: int = Parameter(default=DEFAULT_PAGE_SIZE, ge=1, le=1000),
    ) -> dict[str, Any]:
        body, user_id, tree = scoped_body(data)
        matching = all_of(
            parse_filter(tree) if tree is not None else None,
            visible_to(text_field(body, "agent_id"), text_field(body, "run_id")),
        )
        listing = ListFilter(where=to_sql(matching) if matching is not None else None)

        async def every(session: AsyncSession) -> list[Memory]:
            service = memory_service(session, runtime)
            rows: list[Memory] = []
            cursor = None
            while True:
                found = await service.list_page(user_id, listing, _LIST_PAGE, cursor)
                rows.extend(found.items)
                if found.next_cursor is None:
                    return rows
                cursor = found.next_cursor

        rows = await reads(every, fresh=True)
        start = (page - 1) * page_size
        more = len(rows) > start + page_size
        return {
            "count": len(rows),
            "next": f"?page={page + 1}&page_size={page_size}" if more else None,
            "previous": f"?page={page - 1}&page_size={page_size}" if page > 1 else None,
            "results": [mem0_memory(m) for m in rows[start : start + page_size]],
        }

    @post(
        "/v3/memories/search",
        status_code=200,
        summary="mem0: search a user's memories (the 8-stage hybrid retrieval)",
        responses=COMMON_PROBLEMS,
    )
    async def search(
        self,
        data: Annotated[Any, bodies_doc.SEARCH],
        runtime: Runtime,
        reads: Reads,
        request: Request,
    ) -> dict[str, Any]:
        body, user_id, tree = scoped_body(data)
        query: dict[str, Any] = {"query": body.get("query"), "filters": tree}
        query["consistency"] = "indexed"  # mem0's add is read by the next search
        for key in ("top_k", "limit"):
            if body.get(key) is not None:
                # JSON has one number type: 5.0 is the integer 5 (JSON Schema's too).
                value = body[key]
                whole = isinstance(value, float) and value.is_integer()
                query["top_k"] = int(value) if whole else value
        if body.get("threshold") is not None:
            query["min_relevance"] = relevance_floor(_threshold(body["threshold"]))
        for key in ("agent_id", "run_id"):
            if body.get(key) is not None:
                query[key] = body[key]
        found = await search_user(
            user_id,
            converted(query, SearchBody),
            runtime,
            reads,
            request.headers.get("X-Request-ID"),
        )
        return {
            "results": [
                memory_out(
                    hit.memory,
                    score_of(hit.relevance) if hit.relevance is not None else hit.score,
                )
                for hit in found.results
                if hit.history_of is None
            ]
        }

    @get("/v1/memories/{memory_id:str}", summary="mem0: one memory", responses=COMMON_PROBLEMS)
    async def get_memory(
        self, memory_id: Mem0MemoryId, reads: Reads, runtime: Runtime
    ) -> dict[str, Any]:
        wanted = parse_memory_id(memory_id)

        async def read(session: AsyncSession) -> Memory:
            # By the memory's id (mem0's): its current version, its last once deleted.
            return await memory_service(session, runtime).get(await _owner(session, wanted), wanted)

        memory = await reads(read, fresh=True)
        if not memory.is_current:
            # Deleted, as mem0 answers it: gone from get; history(id) still lists its versions.
            raise NotFoundError(f"memory {memory_id} was deleted (history(id) shows its versions)")
        return mem0_memory(memory)

    @put(
        "/v1/memories/{memory_id:str}",
        summary="mem0: update a memory's text and/or metadata (a new version, the same id)",
        responses=COMMON_PROBLEMS,
    )
    async def update(
        self,
        memory_id: Mem0MemoryId,
        data: Annotated[Any, bodies_doc.UPDATE],
        service: MemoryService,
        runtime: Runtime,
    ) -> dict[str, Any]:
        return mem0_memory(await _update(service, runtime, memory_id, body_of(data)))

    @delete(
        "/v1/memories/{memory_id:str}",
        status_code=200,
        summary="mem0: delete a memory (its current version ends; its history stays)",
        responses=COMMON_PROBLEMS,
    )
    async def delete_memory(
        self, memory_id: Mem0MemoryId, service: MemoryService
    ) -> dict[str, Any]:
        await _delete(service, memory_id)
        return {"message": "Memory deleted successfully!"}

    @delete(
        "/v1/memories",
        status_code=200,
        summary="mem0: delete every current memory of a user (or of its agent or run)",
        responses=COMMON_PROBLEMS,
    )
    async def delete_all(
        self,
        service: MemoryService,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
    ) -> dict[str, Any]:
        if user_id is None:
            raise InvalidInputError(
                "delete_all needs user_id: memories belong to a user here (agent_id and "
                "run_id narrow it to that agent's or run's memories)",
                field="user_id",
            )
        # The messages still queued (of that agent or run) first, in the same transaction:
        # none of them becomes a memory after this answer.
        cancelled = await cancel_queued(service.repository.session, user_id, agent_id, run_id)
        # Exactly that agent's or run's memories, as DELETE /v1/users/{u}/memories ends them.
        owned = deletion_filter(None, agent_id, run_id)
        listing = ListFilter(where=to_sql(owned) if owned is not None else None)
        ended = await service.delete_all(user_id, listing)
        return {
            "message": "Memories deleted successfully!",
            "deleted": len(ended),
            "cancelled_messages": cancelled,
        }

    @get(
        "/v1/memories/{memory_id:str}/history",
        summary="mem0: a memory's history (ADD, UPDATE..., DELETE)",
        responses=COMMON_PROBLEMS,
    )
    async def history(
        self, memory_id: Mem0MemoryId, reads: Reads, runtime: Runtime
    ) -> list[dict[str, Any]]:
        wanted = parse_memory_id(memory_id)

        async def read(session: AsyncSession) -> list[Memory]:
            return await memory_service(session, runtime).history(
                await _owner(session, wanted), wanted
            )

        return history_out(await reads(read, fresh=True))

    @put("/v1/batch", summary="mem0: update several memories", responses=COMMON_PROBLEMS)
    async def batch_update(
        self,
        data: Annotated[Any, bodies_doc.BATCH_UPDATE],
        service: MemoryService,
        runtime: Runtime,
    ) -> dict[str, Any]:
        items = batch_items(data)
        for item in items:
            await _update(service, runtime, item_memory_id(item), item)
        return {"message": f"Successfully updated {len(items)} memories"}

    @delete(
        "/v1/batch",
        status_code=200,
        summary="mem0: delete several memories",
        responses=COMMON_PROBLEMS,
    )
    async def batch_delete(
        self, data: Annotated[Any, bodies_doc.BATCH_DELETE], service: MemoryService
    ) -> dict[str, Any]:
        items = batch_items(data)
        for item in items:
            await _delete(service, item_memory_id(item))
        return {"message": f"Successfully deleted {len(items)} memories"}


def _threshold(raw: Any) -> float:
    if isinstance(raw, bool) or not isinstance(raw, int | float) or not 0 <= raw <= 1:
        raise InvalidInputError("threshold must be a number from 0 to 1", field="threshold")
    return float(raw)


async def _events(
    service: MemoryService, user_id: str, decisions: dict[uuid.UUID, list[Any]]
) -> list[dict[str, Any]]:
    """The ingestion's decisions as mem0's add events, by the memory's id."""
    events = []
    for taken in decisions.values():
        for decision in taken:
            if decision.operation not in ("ADD", "UPDATE", "DELETE"):
                continue
            version_id = decision.memory_id or decision.target_memory_id
            if version_id is None:
                continue
            memory = await service.get(user_id, version_id)
            events.append(
                _event(memory.chain_id, decision.content or memory.content, decision.operation)
            )
    return events
