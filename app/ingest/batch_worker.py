"""The batch job worker: writes the batch creates answered 202 (app/memories/batch_jobs.py),
beside the message workers (app/ingest/worker.py), with their queue, lease and retry policy.

It claims the oldest due job of its COGNIS_INGEST_QUEUE (the accepting process's) with FOR
UPDATE SKIP LOCKED (so every process that runs workers of that queue shares it, no broker),
embeds its memories as bulk work with no deadline (nobody waits on the request any more), then
writes them in one transaction exactly as a 201 does: the same MemoryService code, the same
outbox rows, and the job marked done with the memory ids in that transaction. The claim is
leased and the lease renewed by a heartbeat while the worker works: if its process dies, the
lease runs out and another worker takes the job again. A failed attempt is retried with
backoff; bad input, or the last of COGNIS_INGEST_MAX_ATTEMPTS, fails the job with its error.
"""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

import structlog
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app import tracing
from app.config import ApiSettings, IngestSettings, RetrievalSettings
from app.db.tenant import tenant_scope
from app.errors import UserErasedError
from app.ingest.worker import PERMANENT_ERRORS, RETRY_BACKOFF_MAX_S
from app.memories.batch_jobs import BatchJobRepository, ClaimedJob, drafts_from_json
from app.memories.drafts import embed_drafts
from app.memories.service import MemoryService
from app.memories.user_lock import hold_for_write
from app.ml.categories import CategoryClassifier
from app.ml.embedder import Embedder
from app.ml.scheduling.work import Work, WorkClass
from app.wakeup import renewing_lease, work_until_stopped

log = structlog.get_logger(__name__)


class JobLost(Exception):
    """The job is not this worker's any more: taken over after its lease ran out, or erased
    with its user. Its write is rolled back."""


class BatchJobWorker:
    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        embedder: Embedder,
        classifier: CategoryClassifier,
        api: ApiSettings,
        ingest: IngestSettings,
        retrieval: RetrievalSettings,
    ) -> None:
        # The background role: it claims jobs of every tenant, and writes each in its own.
        self._sessionmaker = sessionmaker
        self._embedder = embedder
        self._classifier = classifier
        self._api = api
        self._ingest = ingest
        self._retrieval = retrieval
        self._wake = asyncio.Event()

    @property
    def _lease(self) -> timedelta:
        return timedelta(seconds=self._ingest.ingest_lease_s)

    def wake(self) -> None:
        """A job was queued by this process: do not wait for the next poll."""
        self._wake.set()

    async def claim(self) -> ClaimedJob | None:
        """The next due job, leased to this worker; one that has had all its attempts (its
        workers died with it) is failed instead, and the next one looked at."""
        while True:
            async with self._sessionmaker() as session, session.begin():
                repository = BatchJobRepository(session)
                job = await repository.claim(self._lease, self._ingest.ingest_queue)
                if job is None:
                    return None
                if job.attempts <= self._ingest.ingest_max_attempts:
                    assert job.lease_token is not None
                    return ClaimedJob(
                        id=job.id,
                        tenant_id=job.tenant_id,
                        user_id=job.user_id,
                        drafts=drafts_from_json(job.batch),
                        attempts=job.attempts,
                        token=job.lease_token,
                        traceparent=job.traceparent,
                    )
                error = job.error or "the process running it stopped"
                await repository.give_up(
                    job, f"given up after {job.attempts - 1} attempts; the last: {error}"
                )
                log.warning("batch_job.given_up", job_id=str(job.id), user_id=job.user_id)

    async def run_once(self) -> bool:
        """Run one job if one is due; False when none was."""
        # The job's write began here (before the claim): an erase of its user after this
        # deleted the job, and refuses the job's transaction (app/memories/user_lock.py).
        started = time.monotonic()
        job = await self.claim()
        if job is None:
            return False
        heartbeat = renewing_lease(
            lambda: self._renew_lease(job),
            self._ingest.ingest_heartbeat_s,
            "batch_job",
            job_id=str(job.id),
        )
        # While tracing, the job's span, in the trace of the request that queued it (its
        # embedding and its write below it), seconds or minutes after that request's answer.
        job_span = tracing.queued_work_span(
            "batch_job.run",
            {
                "cognis.batch_job.id": str(job.id),
                "cognis.batch_job.memories": len(job.drafts),
                "cognis.batch_job.attempt": job.attempts,
            },
            [job.traceparent],
        )
        # The heartbeat renews across tenants, as the claim; the job is written as its
        # tenant's, so every read and write stays there.
        async with heartbeat:
            with tenant_scope(job.tenant_id), job_span:
                try:
                    await self._write(job, started)
                except JobLost:
                    log.warning("batch_job.lost", job_id=str(job.id), user_id=job.user_id)
                except UserErasedError:  # the erase deleted the job with the user's rows
                    log.info("batch_job.user_erased", job_id=str(job.id), user_id=job.user_id)
                except Exception as exc:
                    await self._failed(job, exc)
                else:
                    log.info(
                        "batch_job.done",
                        job_id=str(job.id),
                        user_id=job.user_id,
                        memories=len(job.drafts),
                        attempts=job.attempts,
                        seconds=round(time.monotonic() - started, 3),
                    )
        return True

    async def _write(self, job: ClaimedJob, began: float) -> None:
        drafts = job.drafts
        # Bulk work with no deadline: the model's slow part, before any transaction opens.
        work = Work(WorkClass.BULK, job.tenant_id, job.user_id)
        await embed_drafts(drafts, self._embedder, work)
        with tracing.span("batch_job.write"):
            async with self._sessionmaker() as session, session.begin():
                # The user's write lock (create takes it again, a no-op): an erase since the
                # claim deleted the job and refuses this write (409, dropped), and one that
                # comes later waits for this transaction.
                await hold_for_write(session, job.user_id, began)
                service = MemoryService(
                    session,
                    self._embedder,
                    self._classifier,
                    self._api,
                    self._ingest,
                    self._retrieval,
                )
                memories = await service.create(job.user_id, drafts, work)
                # A job taken over by another worker meanwhile: rolled back.
                if not await BatchJobRepository(session).finish(
                    job.id, job.token, [m.id for m in memories]
                ):
                    raise JobLost

    async def _renew_lease(self, job: ClaimedJob) -> bool:
        async with self._sessionmaker() as session, session.begin():
            return await BatchJobRepository(session).renew_lease(job.id, job.token, self._lease)

    async def _failed(self, job: ClaimedJob, exc: Exception) -> None:
        """Back to the queue after a backoff, or failed for good (bad input, or its last
        attempt), with the error."""
        error = f"{type(exc).__name__}: {exc}"
        final = isinstance(exc, PERMANENT_ERRORS) or (
            job.attempts >= self._ingest.ingest_max_attempts
        )
        retry_in = None if final else timedelta(seconds=min(2.0**job.attempts, RETRY_BACKOFF_MAX_S))
        log.exception("batch_job.failed", job_id=str(job.id), final=final, error=error)
        # Across tenants again, as the claim: the background role's policy.
        with tenant_scope(None):
            async with self._sessionmaker() as session, session.begin():
                await BatchJobRepository(session).release(job.id, job.token, error, retry_in)

    async def run_forever(self, stop: asyncio.Event) -> None:
        """One loop a process: a job is bulk model work, and the model does one at a time."""
        log.info("batch_job.worker_started")
        await work_until_stopped(
            self.run_once,
            self._wake,
            stop,
            self._ingest.ingest_poll_interval_s,
            "batch_job.worker_error",
        )
        log.info("batch_job.worker_stopped")
