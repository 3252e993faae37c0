"""What the API asks of ingestion: submit messages, read a job, dry-run, wait for a job."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app import tracing
from app.config import ApiSettings, IngestSettings
from app.db.models import IngestDecision, IngestTask
from app.errors import NotFoundError
from app.ingest.context import message_context
from app.ingest.domain import Extraction, IncomingMessage, MessageContext, SavedMessage
from app.ingest.intake import check_messages, save_messages
from app.ingest.pipeline import IngestPipeline
from app.ingest.repository import IngestRepository
from app.ingest.worker import IngestWorker
from app.memories.drafts import interactive_write
from app.memories.fields import check_user_id
from app.ml.scheduling.work import Work

WAIT_POLL_S = 0.05


@dataclass(frozen=True, slots=True)
class JobView:
    job_id: uuid.UUID
    user_id: str
    state: str
    tasks: list[IngestTask]
    decisions: dict[uuid.UUID, list[IngestDecision]]


@dataclass(frozen=True, slots=True)
class DryRunResult:
    context: MessageContext
    extraction: Extraction


def job_state(tasks: list[IngestTask]) -> str:
    states = {t.state for t in tasks}
    if states <= {"queued"}:
        return "queued"
    if states & {"queued", "running"}:
        return "running"
    return "failed" if "failed" in states else "done"


class IngestService:
    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        pipeline: IngestPipeline,
        worker: IngestWorker,
        api: ApiSettings,
        ingest: IngestSettings,
    ) -> None:
        self._sessionmaker = sessionmaker
        self._pipeline = pipeline
        self._worker = worker
        self._api = api
        self._ingest = ingest

    async def submit(
        self,
        user_id: str,
        messages: list[IncomingMessage],
        work: Work | None = None,
        also: Callable[[AsyncSession, uuid.UUID], Awaitable[None]] | None = None,
    ) -> tuple[uuid.UUID, list[SavedMessage]]:
        """Step 1 as its own unit of work: the messages and their tasks are committed before
        this returns (no model work: the worker embeds them; and before a caller waits for the
        job). `work`: the write's deadline, for its wait on the user's write lock (default: an
        interactive write of this user).
        `also` writes more in that transaction, given the job id (the request's idempotency
        key); what it raises rolls the whole step back. While tracing, a span `ingest.save`,
        whose trace each message's task carries to the worker."""
        with tracing.span("ingest.save", {"cognis.ingest.messages": len(messages)}):
            async with self._sessionmaker() as session, session.begin():
                saved = await save_messages(
                    IngestRepository(session),
                    self._api,
                    self._ingest,
                    user_id,
                    messages,
                    work or interactive_write(user_id),
                )
                if also is not None:
                    await also(session, saved[0])
        self._worker.wake()
        return saved

    async def read_job(self, user_id: str, job_id: uuid.UUID) -> JobView:
        async with self._sessionmaker() as session:
            return await _read_job(session, user_id, job_id)

    async def wait_for_job(self, user_id: str, job_id: uuid.UUID) -> JobView:
        """Poll until the job is finished (done or failed) or the timeout passes."""
        deadline = time.monotonic() + self._ingest.ingest_wait_timeout_s
        while True:
            async with self._sessionmaker() as session:
                view = await _read_job(session, user_id, job_id)
            if view.state in ("done", "failed") or time.monotonic() >= deadline:
                return view
            await asyncio.sleep(WAIT_POLL_S)

    async def dry_run(self, user_id: str, messages: list[IncomingMessage]) -> list[DryRunResult]:
        """Decisions for each message against the current store, in timestamp order; nothing is
        saved or applied (so a later message does not see an earlier one's effect)."""
        check_user_id(user_id)
        check_messages(messages, self._api, self._ingest)
        results = []
        for message in sorted(messages, key=lambda m: m.sent_at):
            context = message_context(user_id, None, message, message.scope, None, message.metadata)
            decided = await self._pipeline.decide_alone(context)
            results.append(DryRunResult(context, decided.extraction))
        return results


async def _read_job(session: AsyncSession, user_id: str, job_id: uuid.UUID) -> JobView:
    """The job's state and decisions; another user's job looks exactly like a missing one."""
    repository = IngestRepository(session)
    tasks = await repository.job_tasks(check_user_id(user_id), job_id)
    if not tasks:
        raise NotFoundError(f"job {job_id} not found for user {user_id}")
    decisions: dict[uuid.UUID, list[IngestDecision]] = {t.message_id: [] for t in tasks}
    for decision in await repository.job_decisions(user_id, job_id):
        decisions.setdefault(decision.message_id, []).append(decision)
    return JobView(job_id, user_id, job_state(tasks), tasks, decisions)
