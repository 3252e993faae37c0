"""Ingestion endpoints: submit conversation messages, read the resulting job."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

import msgspec
from litestar import Controller, Response, get, post
from litestar.di import Provide
from litestar.status_codes import HTTP_200_OK, HTTP_202_ACCEPTED

from app.api.consistency import (
    INDEX_STATE_HEADER,
    WRITE_WAIT_HEADERS,
    WriteWait,
    provide_write_wait,
)
from app.api.dependencies import provide_ingest_service
from app.api.schemas import Content, Scope, SessionId, Speaker
from app.db.models import IngestDecision
from app.errors import InvalidInputError
from app.ingest.domain import IncomingMessage, Operation
from app.ingest.service import IngestService, JobView

IdempotencyKey = Annotated[str, msgspec.Meta(min_length=1, max_length=256)]


class MessageIn(msgspec.Struct, forbid_unknown_fields=True):
    content: Content
    role: Literal["user", "assistant", "system"] = "user"
    speaker: Speaker | None = None
    timestamp: datetime | None = None  # when it was said; back-dated imports are normal
    session_id: SessionId | None = None
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)
    idempotency_key: IdempotencyKey | None = None
    scope: Scope | None = None  # CONTEXT: the memories belong to this message's session


class MessagesIn(msgspec.Struct, forbid_unknown_fields=True):
    messages: Annotated[list[MessageIn], msgspec.Meta(min_length=1)]


class DecisionOut(msgspec.Struct):
    operation: str
    target_memory_id: uuid.UUID | None
    memory_id: uuid.UUID | None
    content: str | None
    category: str | None
    reason: str | None
    event_time: datetime | None = None
    extractor: str | None = None
    model: str | None = None
    fallback_used: bool = False
    failure: str | None = None
    raw_answer_sha256: str | None = None
    latency_ms: float | None = None

    @classmethod
    def of(cls, d: IngestDecision) -> DecisionOut:
        return cls(
            operation=d.operation,
            target_memory_id=d.target_memory_id,
            memory_id=d.memory_id,
            content=d.content,
            category=d.category,
            reason=d.reason,
            extractor=d.extractor,
            model=d.model,
            fallback_used=d.fallback_used,
            failure=d.failure,
            raw_answer_sha256=d.raw_answer_sha256,
            latency_ms=d.latency_ms,
        )

    @classmethod
    def planned(cls, op: Operation) -> DecisionOut:
        return cls(
            operation=op.op,
            target_memory_id=op.target.memory_id if op.target else None,
            memory_id=None,
            content=op.content,
            category=op.category,
            reason=op.reason,
            event_time=op.event_time,
        )


class SubmittedMessageOut(msgspec.Struct):
    message_id: uuid.UUID
    job_id: uuid.UUID
    duplicate: bool


class MessageResultOut(msgspec.Struct):
    message_id: uuid.UUID
    sent_at: datetime
    state: str
    attempts: int
    last_error: str | None
    decisions: list[DecisionOut]


class JobOut(msgspec.Struct):
    job_id: uuid.UUID
    user_id: str
    state: str  # queued | running | done | failed
    messages: list[MessageResultOut]
    submitted: list[SubmittedMessageOut] | None = None


class DryRunMessageOut(msgspec.Struct):
    content: str
    sent_at: datetime
    speaker: str | None
    extractor: str
    fallback_used: bool
    failure: str | None
    decisions: list[DecisionOut]


class DryRunOut(msgspec.Struct):
    dry_run: bool
    messages: list[DryRunMessageOut]


def _incoming(m: MessageIn) -> IncomingMessage:
    return IncomingMessage(
        content=m.content,
        sent_at=m.timestamp or datetime.now(UTC),
        role=m.role,
        speaker=m.speaker,
        session_id=m.session_id,
        metadata=m.metadata,
        idempotency_key=m.idempotency_key,
        scope=m.scope,
    )


def job_out(view: JobView) -> JobOut:
    return JobOut(
        job_id=view.job_id,
        user_id=view.user_id,
        state=view.state,
        messages=[
            MessageResultOut(
                message_id=t.message_id,
                sent_at=t.sent_at,
                state=t.state,
                attempts=t.attempts,
                last_error=t.last_error,
                decisions=[DecisionOut.of(d) for d in view.decisions.get(t.message_id, [])],
            )
            for t in view.tasks
        ],
    )


def _parse_job_id(raw: str) -> uuid.UUID:
    try:
        return uuid.UUID(raw)
    except ValueError as exc:
        raise InvalidInputError(f"job id {raw[:64]!r} is not a UUID", field="job_id") from exc


class MessageController(Controller):
    path = "/v1/users/{user_id:str}"
    tags = ["ingestion"]
    dependencies = {"service": Provide(provide_ingest_service)}

    @post(
        "/messages",
        status_code=HTTP_202_ACCEPTED,
        summary="Submit conversation messages: saved at once, turned into memories by a job",
        dependencies={"index_wait": Provide(provide_write_wait)},
        response_headers=WRITE_WAIT_HEADERS,
    )
    async def submit_messages(
        self,
        user_id: str,
        data: MessagesIn,
        service: IngestService,
        index_wait: WriteWait,
        wait: bool = False,
        dry_run: bool = False,
    ) -> Response[JobOut | DryRunOut]:
        if index_wait.requested and not (wait and not dry_run):
            # Memories exist only once the job has run: there is nothing to wait for before.
            raise InvalidInputError("wait_for=indexed needs wait=true", field="wait_for")
        incoming = [_incoming(m) for m in data.messages]
        if dry_run:
            results = await service.dry_run(user_id, incoming)
            return Response(
                DryRunOut(
                    dry_run=True,
                    messages=[
                        DryRunMessageOut(
                            content=r.context.content,
                            sent_at=r.context.sent_at,
                            speaker=r.context.speaker,
                            extractor=r.extractor,
                            fallback_used=r.fallback_used,
                            failure=r.failure,
                            decisions=[DecisionOut.planned(op) for op in r.operations],
                        )
                        for r in results
                    ],
                ),
                status_code=HTTP_200_OK,
            )
        # Step 1 is committed by the service before any slow work starts.
        job_id, saved = await service.submit(user_id, incoming)
        if wait:
            view = await service.wait_for_job(user_id, job_id)
        else:
            view = await service.read_job(user_id, job_id)
        body = job_out(view)
        body.submitted = [SubmittedMessageOut(s.message_id, s.job_id, s.duplicate) for s in saved]
        finished = view.state in ("done", "failed")
        headers: dict[str, str] = {}
        if index_wait.requested:
            if finished:
                written = {
                    memory_id
                    for decisions in view.decisions.values()
                    for d in decisions
                    for memory_id in (d.memory_id, d.target_memory_id)
                    if memory_id is not None
                }
                headers = await index_wait.headers_for(user_id, sorted(written))
            else:
                headers = {INDEX_STATE_HEADER: "pending"}
        return Response(
            body,
            status_code=HTTP_200_OK if wait and finished else HTTP_202_ACCEPTED,
            headers=headers,
        )

    @get("/jobs/{job_id:str}", summary="An ingestion job: its state and, when done, its decisions")
    async def get_job(self, user_id: str, job_id: str, service: IngestService) -> JobOut:
        return job_out(await service.read_job(user_id, _parse_job_id(job_id)))
