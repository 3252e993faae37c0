"""Ingestion endpoints: submit conversation messages, read the resulting job."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from litestar import Controller, Response, get, post
from litestar.di import Provide
from litestar.openapi.datastructures import ResponseSpec
from litestar.status_codes import HTTP_200_OK, HTTP_202_ACCEPTED

from app.api.consistency import (
    INDEX_STATE_HEADER,
    WRITE_WAIT_HEADERS,
    WriteWait,
    provide_write_wait,
)
from app.api.contract import COMMON, KEYED, USER_WRITE, UserId, parse_job_id, problems
from app.api.deadlines import provide_interactive_work
from app.api.dependencies import provide_ingest_service
from app.api.idempotency import (
    REPLAY_HEADERS,
    IdempotentWrite,
    KeyTakenError,
    provide_idempotent_write,
)
from app.api.schemas.messages import (
    DecisionOut,
    DryRunMessageOut,
    DryRunOut,
    JobOut,
    MessageIn,
    MessageResultOut,
    MessagesIn,
    SubmittedMessageOut,
)
from app.errors import InvalidInputError
from app.idempotency.rules import IdempotencyKeyInUseError
from app.ingest.domain import IncomingMessage, SavedMessage
from app.ingest.service import IngestService, JobView
from app.ml.scheduling.work import Work


def _incoming(m: MessageIn) -> IncomingMessage:
    return IncomingMessage(
        content=m.content,
        sent_at=m.timestamp or datetime.now(UTC),
        role=m.role,
        speaker=m.speaker,
        session_id=m.session_id,
        agent_id=m.agent_id,
        run_id=m.run_id,
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


class MessageController(Controller):
    path = "/v1/users/{user_id:str}"
    tags = ["ingestion"]
    dependencies = {"service": Provide(provide_ingest_service)}

    @post(
        "/messages",
        status_code=HTTP_202_ACCEPTED,
        summary="Submit conversation messages: saved at once, turned into memories by a job",
        dependencies={
            "index_wait": Provide(provide_write_wait),
            "work": Provide(provide_interactive_work),
            "idempotency": Provide(provide_idempotent_write),
        },
        response_headers=WRITE_WAIT_HEADERS + REPLAY_HEADERS,
        responses={
            HTTP_200_OK: ResponseSpec(
                data_container=JobOut | DryRunOut,  # type: ignore[arg-type]
                description="wait=true and the job finished: the job with its decisions; or "
                "dry_run=true: the decisions that would be taken, nothing written.",
                generate_examples=False,
            ),
            **problems(*USER_WRITE, *KEYED),
        },
    )
    async def submit_messages(
        self,
        user_id: UserId,
        data: MessagesIn,
        service: IngestService,
        index_wait: WriteWait,
        work: Work,
        idempotency: IdempotentWrite,
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
                            extractor=r.extraction.extractor,
                            fallback_used=r.extraction.fallback_used,
                            failure=r.extraction.failure,
                            decisions=[
                                DecisionOut.planned(op, r.extraction)
                                for op in r.extraction.operations
                            ],
                        )
                        for r in results
                    ],
                ),
                status_code=HTTP_200_OK,
            )
        submitted: tuple[uuid.UUID, list[SavedMessage] | None]
        if idempotency.request is None:
            # Step 1 is committed by the service before any slow work starts.
            submitted = await service.submit(user_id, incoming, work)
            return await _job_response(service, index_wait, user_id, submitted, wait)
        previous = await idempotency.previous()
        if previous is None:
            try:
                submitted = await service.submit(user_id, incoming, work, idempotency.claim_job)
            except KeyTakenError:  # a twin with this key committed its step 1 first
                previous = await idempotency.previous()
                if previous is None:  # and expired since: vanishingly rare, but not a 500
                    raise IdempotencyKeyInUseError(idempotency.request.key, 1) from None
        if previous is not None:
            if previous.state == "done":
                return idempotency.replay(previous)
            # Its request died before answering: answer from its job (never a second job).
            submitted = (idempotency.check_abandoned(previous), None)
        return await idempotency.finish(
            await _job_response(service, index_wait, user_id, submitted, wait)
        )

    @get(
        "/jobs/{job_id:str}",
        summary="An ingestion job: its state and, when done, its decisions",
        responses=problems(*COMMON, 404),
    )
    async def get_job(self, user_id: UserId, job_id: str, service: IngestService) -> JobOut:
        return job_out(await service.read_job(user_id, parse_job_id(job_id)))


async def _job_response(
    service: IngestService,
    index_wait: WriteWait,
    user_id: str,
    submitted: tuple[uuid.UUID, list[SavedMessage] | None],
    wait: bool,
) -> Response[JobOut | DryRunOut]:
    """What a submission answers: its job (finished, with wait=true), and which messages
    it saved (None: from the job's tasks, when the submitting request is gone)."""
    job_id, saved = submitted
    if wait:
        view = await service.wait_for_job(user_id, job_id)
    else:
        view = await service.read_job(user_id, job_id)
    body = job_out(view)
    if saved is None:
        saved = [SavedMessage(t.message_id, job_id, duplicate=False) for t in view.tasks]
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
