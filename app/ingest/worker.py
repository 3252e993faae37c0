"""Ingestion workers: take queued messages from Postgres (FOR UPDATE SKIP LOCKED, no broker),
run the pipeline, write each user's result in one transaction.

A claim takes the due messages of several users of one tenant together (up to
`ingest_claim_max_users` users and `ingest_claim_max_messages` messages), each user's in the
order they were sent; tenants take turns at the claim, so one tenant's backlog never holds up
another's next message for more than a round. The claim's messages are read in one query and
embedded in one model call, with the other texts their decisions will embed (their sentences,
a correction's claim). Then each user's batch is decided and applied in order in a transaction
of its own: each decision reads the store as the previous one left it, keeps its own audit
rows, and a message that fails is rolled back alone (a savepoint) and handled as before: bad
input fails at once, anything else is retried later, and the messages after it wait for it.
What fails a user's transaction, or the model on a user's text, fails only that user's batch.
With an LLM, no transaction waits for it: each message's answer is asked with none open, and
the message applied in a transaction of its own if its candidates are still those the LLM was
shown, else asked again (app/ingest/llm_answer.py).

A task that fails because a dependency is unavailable (the model service unreachable, timing
out or answering 503; Postgres unreachable) spends no attempt: the message is not at fault,
so it waits with backoff for as long as the outage lasts, up to COGNIS_INGEST_OUTAGE_MAX_AGE_S
after it was queued; only then is it failed, and `python -m app requeue-messages` queues the
failed ones again (a message accepted is a message applied, issue 56).

The claim is leased, and the lease renewed by a heartbeat while the worker works on it: if the
worker dies mid-claim, the short lease runs out and another worker takes the tasks again within
seconds. Nothing of a user is written before its transaction, so a crash leaves each user's
store either as it was or with that user's batch applied whole.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import structlog
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app import metrics, tracing
from app.config import IngestSettings
from app.db.models import IngestDecision, Message
from app.db.tenant import tenant_scope
from app.errors import (
    ConflictError,
    DeadlineExceededError,
    EmbedderUnavailableError,
    InvalidInputError,
    UserErasedError,
)
from app.heartbeat import Beat, Heartbeats
from app.ingest.context import message_context
from app.ingest.domain import MessageContext
from app.ingest.llm_answer import LlmAnswer, StaleAnswer
from app.ingest.pipeline import ASK_AGAIN, Decided, IngestPipeline
from app.ingest.preparation import ClaimPreparation, Prepared
from app.ingest.repository import Claim, ClaimedTask, IngestRepository
from app.memories.user_lock import hold_for_write
from app.outages import causes, unavailable_store
from app.wakeup import renewing_lease, work_until_stopped
from app.webhooks import events as webhook_events

log = structlog.get_logger(__name__)

RETRY_BACKOFF_MAX_S = 60.0
# While a dependency is away, a task tries again after a pause that grows with its wait (half
# of it), between these bounds: a long outage costs few claims, a short one little delay.
OUTAGE_BACKOFF_MIN_S = 1.0
OUTAGE_BACKOFF_MAX_S = 30.0
# Failures that are the model service's unavailability, not the message's fault: unreachable,
# out of time or answering 503 (after the client's own retries). A store's is told by
# app/outages.py, the rule the API's 503s follow.
MODEL_OUTAGE_ERRORS = (EmbedderUnavailableError, DeadlineExceededError)
# Failures that the same input will always meet again (a date overflow included); the batch
# job worker (app/ingest/batch_worker.py) retries by the same rules.
PERMANENT_ERRORS = (InvalidInputError, OverflowError)
# How often a message is decided again when a memory its decision changes was superseded or
# deleted meanwhile by a write that does not wait for this batch (an API PATCH or DELETE).
DECIDE_AGAIN = 2


class LeaseLost(Exception):
    """Another worker took the tasks over after this one's lease ran out."""


@dataclass(frozen=True, slots=True)
class Failure:
    task: ClaimedTask
    error: Exception
    final: bool
    outage: bool = False  # a dependency was away: tried again without spending an attempt


@dataclass(slots=True)
class BatchOutcome:
    """What became of a claim's tasks in the batch transaction."""

    applied: list[tuple[ClaimedTask, Decided, list[IngestDecision]]] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    unstarted: list[ClaimedTask] = field(default_factory=list)


class IngestWorker:
    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        pipeline: IngestPipeline,
        ingest: IngestSettings,
    ) -> None:
        self._sessionmaker = sessionmaker
        self._pipeline = pipeline
        self._ingest = ingest
        self._preparation = ClaimPreparation(sessionmaker, pipeline)
        # The wake-up events of the loops waiting for work (each loop has its own).
        self._idle: list[asyncio.Event] = []
        # The tenant of this worker's last claim: the next claim starts with the tenants after
        # it (round robin; every loop of the worker shares it).
        self._last_tenant: uuid.UUID | None = None

    def wake(self) -> None:
        """New work was queued by this process: do not wait for the next poll. One idle loop
        is woken, not all: its claim takes every due user of the tenant, and a busy loop looks
        for work again as soon as it is done (woken all, the others' claims find nothing)."""
        if self._idle:
            self._idle[-1].set()

    async def claim(self) -> list[Claim]:
        """The next due users' batches of messages (one tenant's, the tenants taking turns),
        claimed in one transaction under one lease; empty when nothing is due."""
        lease = timedelta(seconds=self._ingest.ingest_lease_s)
        async with self._sessionmaker() as session, session.begin():
            claims = await IngestRepository(session).claim(
                self._ingest.ingest_queue,
                lease,
                self._ingest.ingest_claim_max_messages,
                self._last_tenant,
                self._ingest.ingest_claim_max_users,
            )
        if claims:
            self._last_tenant = claims[0].tenant_id
        return claims

    async def run_once(self) -> bool:
        """Process one claim if something is due; False when nothing was."""
        # The batch's write began here (before the claim): an erase of its user after this
        # deleted its tasks, and refuses the batch's transaction (app/memories/user_lock.py).
        began = time.monotonic()
        claims = await self.claim()
        if not claims:
            return False
        token = claims[0].token
        tasks = [task for claim in claims for task in claim.tasks]
        heartbeat = renewing_lease(
            lambda: self._renew_lease(token),
            self._ingest.ingest_heartbeat_s,
            "ingest",
            token=str(token),
        )
        # While tracing, the claim's span: a claim of one traced message continues its trace.
        batch_span = tracing.queued_work_span(
            "ingest.batch",
            {"cognis.ingest.messages": len(tasks), "cognis.ingest.users": len(claims)},
            [task.traceparent for task in tasks],
        )
        metrics.INGEST_CLAIM_USERS.observe(len(claims))
        # The heartbeat renews across tenants, as the claim; the work is its tenant's, so every
        # read and write stays there.
        async with heartbeat:
            with tenant_scope(claims[0].tenant_id), batch_span:
                prepared = await self._preparation.prepare(claims)
                for claim in claims:
                    await self._process_user(claim, prepared, began)
        return True

    async def _process_user(self, claim: Claim, prepared: Prepared, began: float) -> None:
        """One user's batch in its own transaction; what fails here is this user's alone."""
        try:
            failed = prepared.failed.get(claim.user_id)
            if failed is not None:
                raise failed
            await self._process(claim, prepared, began)
        except LeaseLost:
            log.warning("ingest.lease_lost", message_ids=_ids(claim.tasks))
        except UserErasedError:  # its messages and tasks went with the user
            log.info("ingest.user_erased", message_ids=_ids(claim.tasks))
        except Exception as exc:
            await self._give_back(claim, claim.tasks, exc)

    async def _renew_lease(self, token: uuid.UUID) -> bool:
        lease = timedelta(seconds=self._ingest.ingest_lease_s)
        async with self._sessionmaker() as session, session.begin():
            return await IngestRepository(session).renew_lease(token, lease)

    async def _process(self, claim: Claim, prepared: Prepared, began: float) -> None:
        messages = {
            task.message_id: prepared.messages[task.message_id]
            for task in claim.tasks
            if task.message_id in prepared.messages
        }
        if not messages:  # erased meanwhile: the task rows went with them
            return
        if not self._pipeline.asks_llm:
            await self._commit(claim, claim.tasks, [], messages, prepared, began, {})
            return
        # With an LLM, one message at a time: its answer asked with no transaction open, then
        # the message applied in a transaction of its own (app/ingest/llm_answer.py).
        for position, task in enumerate(claim.tasks):
            later = claim.tasks[position + 1 :]
            outcome = await self._commit_answered(claim, task, later, messages, prepared, began)
            if outcome.unstarted or task.message_id not in messages:
                return  # a failure to retry: the later messages went back with it

    async def _commit_answered(
        self,
        claim: Claim,
        task: ClaimedTask,
        later: list[ClaimedTask],
        messages: dict[uuid.UUID, Message],
        prepared: Prepared,
        began: float,
    ) -> BatchOutcome:
        """One message with its LLM answer, asked again while it goes stale before it applies,
        then left to the deterministic extractor."""
        message = messages.get(task.message_id)
        if message is None:
            return BatchOutcome()
        context = self._context(claim, task, message, prepared)
        answer: LlmAnswer | Exception | None = None
        for _ in range(ASK_AGAIN + 1):
            try:
                answer = await self._pipeline.ask(context)
            except Exception as exc:  # the candidates' read: handled as the message's failure
                answer = exc
            try:
                return await self._commit(
                    claim, [task], later, messages, prepared, began, {task.message_id: answer}
                )
            except StaleAnswer:
                continue
        assert isinstance(answer, LlmAnswer)
        gave_up = {task.message_id: answer.gave_up(ASK_AGAIN + 1)}
        return await self._commit(claim, [task], later, messages, prepared, began, gave_up)

    async def _commit(
        self,
        claim: Claim,
        tasks: list[ClaimedTask],
        later: list[ClaimedTask],
        messages: dict[uuid.UUID, Message],
        prepared: Prepared,
        began: float,
        answers: Mapping[uuid.UUID, LlmAnswer | Exception],
    ) -> BatchOutcome:
        """`tasks` decided and applied in order in one transaction, the claim's `later` tasks
        still held (returned to the queue if one of `tasks` fails to be retried)."""
        fresh = {i: e for i, e in prepared.fresh.items() if i in messages}
        async with self._sessionmaker() as session, session.begin():
            # The user's write lock first (an erase takes it before the task rows): an erase
            # that ran since the claim removed the tasks and refuses this write.
            await hold_for_write(session, claim.user_id, began)
            repository = IngestRepository(session)
            await repository.lock_user(claim.tenant_id, claim.user_id)
            await repository.store_embeddings(claim.user_id, fresh)
            outcome = await self._apply_in_order(session, claim, tasks, messages, prepared, answers)
            # Checked last, so the rows are not locked (and the heartbeat not blocked) while
            # the batch is decided; a claim lost meanwhile rolls the whole batch back.
            owned = await repository.lock_owned_tasks(claim.token, claim.user_id)
            if owned != {t.message_id for t in [*tasks, *later]}:
                raise LeaseLost
            applied = [task.message_id for task, _, _ in outcome.applied]
            await repository.finish_tasks(applied, claim.token)
            for failure in outcome.failures:
                await self._release(repository, claim, failure)
            if outcome.unstarted:
                outcome.unstarted += later
            await repository.return_unstarted(_ids_of(outcome.unstarted), claim.token)
            await repository.move_user_to_back(claim.user_id)
            await webhook_events.queue(session, _processed_events(claim, outcome))
        for message_id in (*applied, *(f.task.message_id for f in outcome.failures)):
            prepared.fresh.pop(message_id, None)  # stored: not again by the next transaction
        self._report(claim, outcome)
        return outcome

    def _context(
        self, claim: Claim, task: ClaimedTask, message: Message, prepared: Prepared
    ) -> MessageContext:
        return message_context(
            claim.user_id,
            message.id,
            message,
            task.scope,
            prepared.embeddings[message.id],
            message.metadata_,
            prepared.prefetched.get(message.id),
        )

    async def _apply_in_order(
        self,
        session: AsyncSession,
        claim: Claim,
        tasks: list[ClaimedTask],
        messages: dict[uuid.UUID, Message],
        prepared: Prepared,
        answers: Mapping[uuid.UUID, LlmAnswer | Exception],
    ) -> BatchOutcome:
        """Decide and apply each message in turn, each in a savepoint of the batch transaction:
        a failed message is undone alone. After one that will be retried, the rest wait."""
        outcome = BatchOutcome()
        for position, task in enumerate(tasks):
            message = messages[task.message_id]
            try:
                # Each message's work in the trace of the request that sent it.
                with tracing.queued_item_span(
                    "ingest.message",
                    {
                        "cognis.ingest.message_id": str(task.message_id),
                        "cognis.ingest.job_id": str(task.job_id),
                        "cognis.ingest.attempt": task.attempts,
                    },
                    task.traceparent,
                ):
                    tracing.content("cognis.ingest.content", message.content)
                    answer = answers.get(task.message_id)
                    if isinstance(answer, Exception):
                        raise answer
                    decided, rows = await self._decide_and_apply(
                        session, claim, task, message, prepared, answer
                    )
                    tracing.annotate(
                        {
                            "cognis.ingest.operations": [r.operation for r in rows],
                            "cognis.ingest.extractor": decided.extraction.extractor,
                        }
                    )
            except StaleAnswer:
                raise  # the whole transaction undone: the LLM is asked again
            except Exception as exc:
                failure = self._failure(task, exc)
                final = failure.final
                outcome.failures.append(failure)
                log.exception(
                    "ingest.task_failed",
                    message_id=str(task.message_id),
                    final=final,
                    outage=failure.outage,
                    error=_describe(exc),
                )
                if not final:
                    outcome.unstarted = tasks[position + 1 :]
                    break
                continue
            outcome.applied.append((task, decided, rows))
        return outcome

    async def _decide_and_apply(
        self,
        session: AsyncSession,
        claim: Claim,
        task: ClaimedTask,
        message: Message,
        prepared: Prepared,
        answer: LlmAnswer | None,
    ) -> tuple[Decided, list[IngestDecision]]:
        """One message, in a savepoint. The memories a decision changes are not locked while it
        is made (an LLM call), so an API write may supersede or delete one before it applies:
        the message is then decided again on what is current, without spending an attempt."""
        for again in range(DECIDE_AGAIN + 1):
            try:
                async with session.begin_nested():
                    context = self._context(claim, task, message, prepared)
                    decided = await self._pipeline.decide(session, context, answer)
                    return decided, await self._pipeline.apply(session, task.job_id, decided)
            except ConflictError as exc:
                if again == DECIDE_AGAIN:
                    raise
                log.info(
                    "ingest.decided_again",
                    message_id=str(task.message_id),
                    reason=_describe(exc),
                )
        raise AssertionError("unreachable")

    def _failure(self, task: ClaimedTask, exc: Exception) -> Failure:
        """What a task's failure means: an outage waits (until the task is too old), bad input
        fails at once, anything else is tried again up to COGNIS_INGEST_MAX_ATTEMPTS."""
        if is_outage(exc):
            return Failure(task, exc, _age_s(task) >= self._ingest.ingest_outage_max_age_s, True)
        # Bad input stays bad: retrying it only holds up the user's later messages.
        permanent = isinstance(exc, PERMANENT_ERRORS)
        return Failure(task, exc, permanent or task.attempts >= self._ingest.ingest_max_attempts)

    async def _release(self, repository: IngestRepository, claim: Claim, failure: Failure) -> None:
        """A failed task back to the queue (after a pause), or failed for good."""
        task, error = failure.task, _describe(failure.error)
        if failure.outage and not failure.final:
            await repository.postpone_task(task.message_id, claim.token, error, _outage_wait(task))
            return
        await repository.release_task(
            task.message_id, claim.token, error, _retry_in(task), failure.final
        )

    def _report(self, claim: Claim, outcome: BatchOutcome) -> None:
        """Metrics and logs, once the batch is committed."""
        metrics.INGEST_BATCH_MESSAGES.observe(len(claim.tasks))
        for failure in outcome.failures:
            metrics.INGEST_FAILURES.labels(final=str(failure.final).lower()).inc()
        for task, decided, rows in outcome.applied:
            operations = [r.operation for r in rows]
            extraction = decided.extraction
            metrics.observe_applied_message(
                extraction.extractor, extraction.fallback_used, operations
            )
            log.info(
                "ingest.message_applied",
                user_id=claim.user_id,
                message_id=str(task.message_id),
                operations=operations,
                extractor=extraction.extractor,
                fallback_used=extraction.fallback_used,
                batch_size=len(claim.tasks),
            )

    async def _give_back(self, claim: Claim, tasks: list[ClaimedTask], exc: Exception) -> None:
        """The batch failed as a whole (nothing of it was written): each task back for a later
        attempt, or failed for good."""
        error = _describe(exc)
        log.exception("ingest.batch_failed", message_ids=_ids(tasks), error=error)
        async with self._sessionmaker() as session, session.begin():
            repository = IngestRepository(session)
            failed: list[webhook_events.Event] = []
            for task in tasks:
                failure = self._failure(task, exc)
                final = failure.final
                metrics.INGEST_FAILURES.labels(final=str(final).lower()).inc()
                await self._release(repository, claim, failure)
                if final:
                    failed.append(
                        webhook_events.message_processed(
                            claim.user_id, task.message_id, task.job_id, error=error
                        )
                    )
            await webhook_events.queue(session, failed)

    async def _loop(self, stop: asyncio.Event, beat: Beat | None = None) -> None:
        wake = asyncio.Event()

        async def run_once() -> bool:
            self._idle.remove(wake)
            try:
                return await self.run_once()
            finally:
                self._idle.append(wake)

        self._idle.append(wake)
        try:
            await work_until_stopped(
                run_once,
                wake,
                stop,
                self._ingest.ingest_poll_interval_s,
                "ingest.worker_error",
                beat,
            )
        finally:
            self._idle.remove(wake)

    async def run_forever(self, stop: asyncio.Event, heartbeats: Heartbeats | None = None) -> None:
        """`ingest_worker_concurrency` loops, so one slow LLM call does not hold up other users;
        with `heartbeats`, each beats a file of its own (`ingest-<n>`): one hung loop shows."""
        log.info("ingest.worker_started", queue=self._ingest.ingest_queue)
        loops = max(1, self._ingest.ingest_worker_concurrency)
        beats = heartbeats or Heartbeats(None)
        await asyncio.gather(*(self._loop(stop, beats.loop(f"ingest-{n}")) for n in range(loops)))
        log.info("ingest.worker_stopped")


def _processed_events(claim: Claim, outcome: BatchOutcome) -> list[webhook_events.Event]:
    """`message.processed` for each task the batch finished (applied, or failed for good), in
    the order the messages were sent."""
    finished = {
        task.message_id: webhook_events.message_processed(
            claim.user_id, task.message_id, task.job_id, rows
        )
        for task, _, rows in outcome.applied
    }
    for failure in outcome.failures:
        if failure.final:
            task = failure.task
            finished[task.message_id] = webhook_events.message_processed(
                claim.user_id, task.message_id, task.job_id, error=_describe(failure.error)
            )
    return [finished[t.message_id] for t in claim.tasks if t.message_id in finished]


def _describe(exc: Exception) -> str:
    return f"{type(exc).__name__}: {exc}"


def is_outage(exc: BaseException) -> bool:
    """Whether `exc`, or an error it was raised from, is a dependency's unavailability: the
    model service's, or a store's connection-level failure (app/outages.py)."""
    if unavailable_store(exc) is not None:
        return True
    return any(isinstance(error, MODEL_OUTAGE_ERRORS) for error in causes(exc))


def _age_s(task: ClaimedTask) -> float:
    """Seconds since the task was queued (0 when unknown)."""
    if task.queued_at is None:
        return 0.0
    return (datetime.now(UTC) - task.queued_at).total_seconds()


def _outage_wait(task: ClaimedTask) -> timedelta:
    wait = min(max(_age_s(task) / 2, OUTAGE_BACKOFF_MIN_S), OUTAGE_BACKOFF_MAX_S)
    return timedelta(seconds=wait)


def _retry_in(task: ClaimedTask) -> timedelta:
    return timedelta(seconds=min(2.0**task.attempts, RETRY_BACKOFF_MAX_S))


def _ids_of(tasks: list[ClaimedTask]) -> list[uuid.UUID]:
    return [t.message_id for t in tasks]


def _ids(tasks: list[ClaimedTask]) -> list[str]:
    return [str(t.message_id) for t in tasks]
