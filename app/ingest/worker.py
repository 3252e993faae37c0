"""Ingestion workers: take queued messages from Postgres (FOR UPDATE SKIP LOCKED, no broker),
run the pipeline, write the result in one transaction.

A task is leased, and the lease renewed by a heartbeat while the worker works on it: if the
worker dies mid-job, the short lease runs out and another worker takes the task again within
seconds. Nothing is written before the final transaction, so a crash leaves the store as it was.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from datetime import timedelta

import numpy as np
import structlog
from sqlalchemy import func
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app import metrics
from app.config import Settings
from app.db.models import IngestTask
from app.db.tenant import tenant_scope
from app.errors import InvalidInputError, UserErasedError
from app.ingest.context import message_context
from app.ingest.pipeline import IngestPipeline
from app.ingest.repository import IngestRepository
from app.memories.user_lock import hold_for_write
from app.ml.embedder import Embedding
from app.wakeup import sleep_until_woken

log = structlog.get_logger(__name__)

RETRY_BACKOFF_MAX_S = 60.0
# Failures that the same input will always meet again (a date overflow included).
PERMANENT_ERRORS = (InvalidInputError, OverflowError)


class LeaseLost(Exception):
    """Another worker took the task over after this one's lease ran out."""


class IngestWorker:
    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        pipeline: IngestPipeline,
        settings: Settings,
    ) -> None:
        self._sessionmaker = sessionmaker
        self._pipeline = pipeline
        self._settings = settings
        self._wake = asyncio.Event()

    def wake(self) -> None:
        """New work was queued by this process: do not wait for the next poll."""
        self._wake.set()

    async def _claim(self) -> IngestTask | None:
        lease = timedelta(seconds=self._settings.ingest_lease_s)
        async with self._sessionmaker() as session, session.begin():
            return await IngestRepository(session).claim_next(self._settings.ingest_queue, lease)

    async def run_once(self) -> bool:
        """Process one task if one is due; False when there was none."""
        task = await self._claim()
        if task is None:
            return False
        assert task.lease_token is not None
        token = task.lease_token
        heartbeat = asyncio.create_task(self._keep_lease(task.message_id, token))
        # Claimed across tenants; handled as its tenant's, so every read and write stays there.
        with tenant_scope(task.tenant_id):
            try:
                await self._process(task, token)
            except LeaseLost:
                log.warning("ingest.lease_lost", message_id=str(task.message_id))
            except UserErasedError:  # its message and task went with the user
                log.info("ingest.user_erased", message_id=str(task.message_id))
            except Exception as exc:
                await self._give_back(task, token, exc)
            finally:
                heartbeat.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await heartbeat
        return True

    async def _keep_lease(self, message_id: uuid.UUID, token: uuid.UUID) -> None:
        """Heartbeat: renew the lease while the task is worked on. Stops when it is no longer
        ours; a failed renewal (the database away) is retried at the next beat, and the final
        write checks ownership anyway."""
        lease = timedelta(seconds=self._settings.ingest_lease_s)
        while True:
            await asyncio.sleep(self._settings.ingest_heartbeat_s)
            try:
                async with self._sessionmaker() as session, session.begin():
                    renewed = await IngestRepository(session).renew_lease(message_id, token, lease)
            except Exception as exc:
                log.warning(
                    "ingest.lease_renewal_failed", message_id=str(message_id), error=str(exc)
                )
                continue
            if not renewed:
                log.warning("ingest.lease_not_renewed", message_id=str(message_id))
                return

    async def _process(self, task: IngestTask, token: uuid.UUID) -> None:
        async with self._sessionmaker() as session:
            message = await IngestRepository(session).get_message(task.user_id, task.message_id)
        if message is None:  # erased meanwhile: the task row went with it
            return
        embedding = None
        if message.embedding_768d is not None and message.embedding_256d is not None:
            embedding = Embedding(
                full=np.asarray(message.embedding_768d), coarse=np.asarray(message.embedding_256d)
            )
        context = message_context(message.user_id, message.id, message, task.scope, embedding)
        decided = await self._pipeline.decide(context)
        async with self._sessionmaker() as session, session.begin():
            # The user's write lock first (an erase takes it before the task rows): an erase
            # that ran meanwhile either removed the task or refuses this write.
            await hold_for_write(session, task.user_id)
            repository = IngestRepository(session)
            owned = await repository.lock_owned_task(task.message_id, token)
            if owned is None:
                raise LeaseLost
            await repository.lock_user(task.user_id)
            rows = await self._pipeline.apply(session, task.job_id, decided)
            owned.state = "done"
            owned.finished_at = func.now()
            owned.lease_token = None
            owned.last_error = None
        metrics.observe_applied_message(
            decided.extraction.extractor,
            decided.extraction.fallback_used,
            [r.operation for r in rows],
        )
        log.info(
            "ingest.message_applied",
            user_id=task.user_id,
            message_id=str(task.message_id),
            operations=[r.operation for r in rows],
            extractor=decided.extraction.extractor,
            fallback_used=decided.extraction.fallback_used,
        )

    async def _give_back(self, task: IngestTask, token: uuid.UUID, exc: Exception) -> None:
        # Bad input stays bad: retrying it only holds up the user's later messages.
        permanent = isinstance(exc, PERMANENT_ERRORS)
        final = permanent or task.attempts >= self._settings.ingest_max_attempts
        metrics.INGEST_FAILURES.labels(final=str(final).lower()).inc()
        error = f"{type(exc).__name__}: {exc}"
        log.exception(
            "ingest.task_failed", message_id=str(task.message_id), final=final, error=error
        )
        retry_in = timedelta(seconds=min(2.0**task.attempts, RETRY_BACKOFF_MAX_S))
        async with self._sessionmaker() as session, session.begin():
            await IngestRepository(session).release_task(
                task.message_id, token, error, retry_in, final
            )

    async def _loop(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            # Cleared before looking for work, so a wake-up that arrives meanwhile is not lost.
            self._wake.clear()
            try:
                if await self.run_once():
                    continue
            except Exception as exc:  # the database went away: keep the loop alive
                log.exception("ingest.worker_error", error=str(exc))
            await sleep_until_woken(self._wake, stop, self._settings.ingest_poll_interval_s)

    async def run_forever(self, stop: asyncio.Event) -> None:
        """`ingest_worker_concurrency` loops, so one slow LLM call does not hold up other users."""
        log.info("ingest.worker_started", queue=self._settings.ingest_queue)
        loops = max(1, self._settings.ingest_worker_concurrency)
        await asyncio.gather(*(self._loop(stop) for _ in range(loops)))
        log.info("ingest.worker_stopped")
