"""CognisClient (sync) and AsyncCognisClient: the Cognis Memory REST API over httpx."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from typing import Any, NoReturn, TypeVar, Unpack

import httpx

from cognis_client import _calls as calls
from cognis_client._calls import (
    Call,
    ContextOptions,
    DeleteFilters,
    EntityMemoryOptions,
    EntityOptions,
    ExportOptions,
    ImportFormat,
    ListOptions,
    MemoryFilters,
    ProfileOptions,
    RetryPolicy,
    SearchOptions,
    WaitFor,
    waiting,
)
from cognis_client.errors import (
    CognisError,
    ConflictError,
    JobNotFinishedError,
    NoAnswerError,
    ServiceUnavailableError,
    error_from_response,
    retry_after_s,
)
from cognis_client.models import (
    BatchJob,
    Context,
    DryRun,
    EntityMemories,
    EntityPage,
    Erasure,
    History,
    ImportSummary,
    Job,
    MemoriesDeleted,
    Memory,
    MemoryChanges,
    MemoryInput,
    MemoryPage,
    Message,
    Profile,
    SearchResult,
    UserPage,
)

T = TypeVar("T")
DEFAULT_TIMEOUT_S = 60.0
# A job is waited for by polling its status this often (seconds) until it is done or failed.
JOB_POLL_S = 0.5
FINISHED_JOB_STATES = frozenset({"done", "failed"})
# How long add_memories waits for a batch the server accepted as a job (202) by default.
BATCH_JOB_TIMEOUT_S = 900.0
# Called before each retry with (attempt number from 1, seconds about to be waited, the error:
# a 503, a 409 idempotency_key_in_use, or the httpx error of an attempt that got no answer).
OnRetry = Callable[[int, float, Exception], None]


def _headers(api_key: str | None) -> dict[str, str]:
    return {"X-API-Key": api_key} if api_key else {}


class _Retrying:
    def __init__(self, retry: RetryPolicy, on_retry: OnRetry | None) -> None:
        self.retry = retry
        self.on_retry = on_retry

    def next_delay(self, call: Call[Any], attempt: int, response: httpx.Response) -> float:
        """Seconds to wait before retrying this answer; raises when it must not be retried."""
        error = error_from_response(response)
        if not _retryable(call, error):
            _give_up(call, error)
        return self._delay(call, attempt, error, retry_after_s(response))

    def lost_answer_delay(
        self, call: Call[Any], attempt: int, error: httpx.TransportError
    ) -> float:
        """An attempt got no answer (timeout, dropped connection): the write may have happened.
        Retried only when that is safe, i.e. the call is a read or carries an idempotency key
        (then the server does the write once and replays its answer)."""
        if not call.repeatable:
            _give_up(call, error)
        return self._delay(call, attempt, error, None)

    def _delay(
        self, call: Call[Any], attempt: int, error: Exception, retry_after: float | None
    ) -> float:
        delay = self.retry.delay_s(attempt, retry_after)
        if attempt >= self.retry.max_retries or delay > self.retry.max_delay_s:
            _give_up(call, error)
        if self.on_retry is not None:
            self.on_retry(attempt + 1, delay, error)
        return delay


def _give_up(call: Call[Any], error: Exception) -> NoReturn:
    """Stop the call: raise a CognisError carrying the write's key (an attempt that got no
    answer becomes NoAnswerError, with the transport's error as its cause)."""
    note = (
        f"Idempotency-Key: {call.idempotency_key} (pass idempotency_key= with this value to "
        "retry without risking a second write)"
    )
    if isinstance(error, CognisError):
        error.idempotency_key = call.idempotency_key
        if call.idempotency_key is not None:
            error.add_note(note)
        raise error
    # Only a request that was (maybe) sent can have written: a refused connection cannot.
    sent = not isinstance(error, httpx.ConnectError)
    no_answer = NoAnswerError(
        error,
        may_have_written=call.method != "GET" and not call.safe_to_repeat and sent,
        idempotency_key=call.idempotency_key,
    )
    if call.idempotency_key is not None:
        no_answer.add_note(note)
    raise no_answer from error


def _retryable(call: Call[Any], error: CognisError) -> bool:
    if isinstance(error, ServiceUnavailableError):  # 503, and 429 (RateLimitedError)
        return True
    # The first attempt with this key is still running on the server: its answer will come.
    in_use = error.problem.get("code") == "idempotency_key_in_use"
    return isinstance(error, ConflictError) and in_use and call.idempotency_key is not None


class _JobWait:
    """wait_for_job's deadline, the same for both clients."""

    def __init__(self, timeout_s: float, poll_s: float) -> None:
        self.timeout_s = timeout_s
        self.poll_s = poll_s
        self.deadline = time.monotonic() + timeout_s

    def finished(self, job: Job | BatchJob) -> bool:
        """Whether `job` is done or failed; JobNotFinishedError when the next poll would come
        after the deadline."""
        if job.state in FINISHED_JOB_STATES:
            return True
        if time.monotonic() + self.poll_s > self.deadline:
            raise JobNotFinishedError(job, self.timeout_s)
        return False


class CognisClient(_Retrying):
    """Blocking client. `with CognisClient(url, api_key=...) as cognis: cognis.search(...)`."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        retry: RetryPolicy | None = None,
        on_retry: OnRetry | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        super().__init__(retry or RetryPolicy(), on_retry)
        self.http = httpx.Client(
            base_url=base_url, headers=_headers(api_key), timeout=timeout_s, transport=transport
        )

    def __enter__(self) -> CognisClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.http.close()

    def _send(self, call: Call[T]) -> T:
        attempt = 0
        while True:
            try:
                response = self.http.send(call.request(self.http))
            except httpx.TransportError as error:
                delay = self.lost_answer_delay(call, attempt, error)
            else:
                if response.is_success:
                    return call.decode(response)
                delay = self.next_delay(call, attempt, response)
            time.sleep(delay)
            attempt += 1

    def add_memory(
        self,
        user_id: str,
        memory: MemoryInput | str | dict[str, Any],
        *,
        idempotency_key: str | None = None,
        wait_for: WaitFor | None = None,
        wait_timeout_ms: int | None = None,
        **fields: Any,
    ) -> Memory:
        """One new memory. `idempotency_key`: the key of this logical write (default: a new
        one, reused by the client's own retries); the same key later replays, never rewrites.
        `wait_for="indexed"`: answered once the memory is searchable (or `wait_timeout_ms`,
        bounded by the server, has passed); every write method takes these two. `fields`:
        the memory's own (`metadata=...`, `category=...`, ...), over those of `memory`."""
        call = calls.add_memory(user_id, calls.as_memory_input(memory, **fields), idempotency_key)
        return self._send(waiting(call, wait_for, wait_timeout_ms))

    def add_memories(
        self,
        user_id: str,
        memories: list[MemoryInput | str | dict[str, Any]],
        *,
        idempotency_key: str | None = None,
        wait_for: WaitFor | None = None,
        wait_timeout_ms: int | None = None,
        job_timeout_s: float = BATCH_JOB_TIMEOUT_S,
    ) -> list[Memory]:
        """Several new memories in one transaction. A batch the server accepts as a job (202:
        more model work than its deadline allows) is waited for, its status polled for up to
        `job_timeout_s` (JobNotFinishedError after: it carries on server-side), and its
        memories returned as a 201's are; BatchJobFailedError if the job failed. A batch an
        older server refuses as too much work (413) is sent again in the parts it says would
        fit, one transaction each, in order."""
        batch = [calls.as_memory_input(m) for m in memories]
        call = calls.add_memories(user_id, batch, idempotency_key)
        try:
            answer = self._send(waiting(call, wait_for, wait_timeout_ms))
        except CognisError as refusal:
            parts = calls.split_batch(refusal, batch, idempotency_key)
            if parts is None:
                raise
        else:
            if answer.job_id is None:
                return answer.items or []
            job = self.wait_for_batch_job(user_id, answer.job_id, timeout_s=job_timeout_s)
            return calls.batch_written(job)
        return [
            memory
            for part, key in parts
            for memory in self.add_memories(
                user_id,
                list(part),
                idempotency_key=key,
                wait_for=wait_for,
                wait_timeout_ms=wait_timeout_ms,
            )
        ]

    def get_memory(self, user_id: str, memory_id: Any) -> Memory:
        """By the memory's id, its current version (its last, `is_current` False, once
        deleted); by a version's id, that version."""
        return self._send(calls.get_memory(user_id, memory_id))

    def list_memories(self, user_id: str, **options: Unpack[ListOptions]) -> MemoryPage:
        """One page of memories, newest first; `next_cursor` leads to the next."""
        return self._send(calls.list_memories(user_id, options))

    def iter_memories(
        self, user_id: str, *, page_size: int = 100, **filters: Unpack[MemoryFilters]
    ) -> Iterator[Memory]:
        """Every memory matching the filters of `list_memories`, page after page."""
        cursor = None
        while True:
            page = self.list_memories(user_id, limit=page_size, cursor=cursor, **filters)
            yield from page.items
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    def update_memory(
        self,
        user_id: str,
        memory_id: Any,
        *,
        if_match: Memory | Any | None = None,
        idempotency_key: str | None = None,
        wait_for: WaitFor | None = None,
        wait_timeout_ms: int | None = None,
        **changes: Any,
    ) -> Memory:
        """A new version of the memory `memory_id` (its id, or any of its versions') with the
        fields of `MemoryChanges` given as keywords changed; it keeps the memory's `id`.
        `if_match`: the version read (a Memory, or a version id): PreconditionFailedError
        (412) instead when another writer has replaced it since. Without it, the update
        applies to whichever version is current."""
        changed = MemoryChanges(**changes)
        call = calls.update_memory(user_id, memory_id, changed, idempotency_key, if_match)
        return self._send(waiting(call, wait_for, wait_timeout_ms))

    def delete_memory(
        self,
        user_id: str,
        memory_id: Any,
        *,
        if_match: Memory | Any | None = None,
        idempotency_key: str | None = None,
        wait_for: WaitFor | None = None,
        wait_timeout_ms: int | None = None,
    ) -> Memory:
        """End the memory `memory_id` (its id, or any of its versions'): its current version,
        returned, ends; its history stays. `if_match` as for `update_memory`."""
        call = calls.delete_memory(user_id, memory_id, idempotency_key, if_match)
        return self._send(waiting(call, wait_for, wait_timeout_ms))

    def delete_memories(
        self,
        user_id: str,
        *,
        idempotency_key: str | None = None,
        wait_for: WaitFor | None = None,
        wait_timeout_ms: int | None = None,
        **filters: Unpack[DeleteFilters],
    ) -> MemoriesDeleted:
        """End every memory the filters keep (`agent_id`/`run_id`: exactly that agent's or
        run's), as `delete_memory` ends one: each keeps its history. No filter: `all=True`,
        every memory of the user. Not an erase (`erase_user` removes everything)."""
        call = calls.delete_memories(user_id, filters, idempotency_key)
        return self._send(waiting(call, wait_for, wait_timeout_ms))

    def history(self, user_id: str, memory_id: Any) -> History:
        """Every version of the memory, oldest first (by its id or any version's)."""
        return self._send(calls.history(user_id, memory_id))

    def search(self, user_id: str, query: str, **options: Unpack[SearchOptions]) -> SearchResult:
        """The 8-stage retrieval; `explain=True` adds every stage's rank and score per hit."""
        return self._send(calls.search(user_id, query, options))

    def context(
        self, user_id: str, query: str | None = None, **options: Unpack[ContextOptions]
    ) -> Context:
        """A prompt-ready block within `max_tokens`: the query's hits, recent changes, then the
        user's stable facts (without a query, the last two), and the memories it cites."""
        return self._send(calls.context(user_id, query, options))

    def profile(self, user_id: str, **options: Unpack[ProfileOptions]) -> Profile:
        """The user's current memories by category, newest first, each with what it replaced."""
        return self._send(calls.profile(user_id, options))

    def entities(self, user_id: str, **options: Unpack[EntityOptions]) -> EntityPage:
        """A page of the named things of the user's memories, by name (docs/entities.md)."""
        return self._send(calls.entities(user_id, options))

    def entity_memories(
        self, user_id: str, entity_id: Any, **options: Unpack[EntityMemoryOptions]
    ) -> EntityMemories:
        """An entity and the current memories that name it, newest first."""
        return self._send(calls.entity_memories(user_id, entity_id, options))

    def add_messages(
        self,
        user_id: str,
        messages: list[Message | str | dict[str, Any]],
        *,
        wait: bool = False,
        idempotency_key: str | None = None,
        wait_for: WaitFor | None = None,
        wait_timeout_ms: int | None = None,
    ) -> Job:
        """Messages for ingestion: the job, finished with `wait=True` (then `wait_for=
        "indexed"` also waits until its memories are searchable), else queued: see
        `wait_for_job`."""
        batch = calls.as_messages(messages)
        call = calls.add_messages(user_id, batch, wait=wait, key=idempotency_key)
        return self._send(waiting(call, wait_for, wait_timeout_ms))

    def dry_run(self, user_id: str, messages: list[Message | str | dict[str, Any]]) -> DryRun:
        """What ingestion would decide for these messages (ADD, UPDATE, DELETE, NONE), with
        nothing written."""
        return self._send(calls.dry_run(user_id, calls.as_messages(messages)))

    def import_memories(
        self,
        user_id: str,
        lines: Iterable[dict[str, Any] | str] | bytes,
        *,
        line_format: ImportFormat = "auto",
        batch_size: int | None = None,
    ) -> ImportSummary:
        """Import a user's history: JSON Lines (dicts, JSON strings, or the bytes of a file)
        in the import's line format (`export`'s, or mem0's). Idempotent by `external_id`: a
        rerun skips what landed. Bad lines are reported in the summary, not raised."""
        call = calls.import_memories(user_id, lines, line_format, batch_size)
        return self._send(call)

    def get_job(self, user_id: str, job_id: Any) -> Job:
        return self._send(calls.get_job(user_id, job_id))

    def get_batch_job(self, user_id: str, job_id: Any) -> BatchJob:
        """A batch create's job (a 202's), with its memories once done."""
        return self._send(calls.get_batch_job(user_id, job_id))

    def wait_for_batch_job(
        self,
        user_id: str,
        job_id: Any,
        *,
        timeout_s: float = BATCH_JOB_TIMEOUT_S,
        poll_s: float = JOB_POLL_S,
    ) -> BatchJob:
        """The batch job once it is done or failed; JobNotFinishedError after `timeout_s`."""
        wait = _JobWait(timeout_s, poll_s)
        while not wait.finished(job := self.get_batch_job(user_id, job_id)):
            time.sleep(poll_s)
        return job

    def wait_for_job(
        self, user_id: str, job_id: Any, *, timeout_s: float = 60.0, poll_s: float = JOB_POLL_S
    ) -> Job:
        """The job once it is done or failed (its status polled every `poll_s`);
        JobNotFinishedError, carrying the last status, after `timeout_s`."""
        wait = _JobWait(timeout_s, poll_s)
        while not wait.finished(job := self.get_job(user_id, job_id)):
            time.sleep(poll_s)
        return job

    def erase_user(
        self, user_id: str, *, agent_id: str | None = None, run_id: str | None = None
    ) -> Erasure:
        """Erase the user from both stores; given agent_id and/or run_id, only the memories
        and messages of exactly that agent and/or run (the shared ones stay)."""
        return self._send(calls.erase_user(user_id, agent_id, run_id))

    def export(self, user_id: str, **options: Unpack[ExportOptions]) -> bytes:
        """The user's memories as JSON Lines in the import's line format (read whole: for a
        very large user, `python -m app export` streams to a file)."""
        return self._send(calls.export(user_id, options))

    def list_users(
        self, *, prefix: str | None = None, limit: int | None = None, cursor: str | None = None
    ) -> UserPage:
        """One page of the tenant's users (by id), with memory counts and last change."""
        return self._send(calls.list_users(prefix, limit, cursor))


class AsyncCognisClient(_Retrying):
    """Asyncio client with the same methods as `CognisClient`, awaited."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        retry: RetryPolicy | None = None,
        on_retry: OnRetry | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        super().__init__(retry or RetryPolicy(), on_retry)
        self.http = httpx.AsyncClient(
            base_url=base_url, headers=_headers(api_key), timeout=timeout_s, transport=transport
        )

    async def __aenter__(self) -> AsyncCognisClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self.http.aclose()

    async def _send(self, call: Call[T]) -> T:
        attempt = 0
        while True:
            try:
                response = await self.http.send(call.request(self.http))
            except httpx.TransportError as error:
                delay = self.lost_answer_delay(call, attempt, error)
            else:
                if response.is_success:
                    return call.decode(response)
                delay = self.next_delay(call, attempt, response)
            await asyncio.sleep(delay)
            attempt += 1

    async def add_memory(
        self,
        user_id: str,
        memory: MemoryInput | str | dict[str, Any],
        *,
        idempotency_key: str | None = None,
        wait_for: WaitFor | None = None,
        wait_timeout_ms: int | None = None,
        **fields: Any,
    ) -> Memory:
        """One new memory. `idempotency_key`: the key of this logical write (default: a new
        one, reused by the client's own retries); the same key later replays, never rewrites.
        `wait_for="indexed"`: answered once the memory is searchable (or `wait_timeout_ms`,
        bounded by the server, has passed); every write method takes these two. `fields`:
        the memory's own (`metadata=...`, `category=...`, ...), over those of `memory`."""
        call = calls.add_memory(user_id, calls.as_memory_input(memory, **fields), idempotency_key)
        return await self._send(waiting(call, wait_for, wait_timeout_ms))

    async def add_memories(
        self,
        user_id: str,
        memories: list[MemoryInput | str | dict[str, Any]],
        *,
        idempotency_key: str | None = None,
        wait_for: WaitFor | None = None,
        wait_timeout_ms: int | None = None,
        job_timeout_s: float = BATCH_JOB_TIMEOUT_S,
    ) -> list[Memory]:
        """Several new memories in one transaction (written by a job the client waits for when
        the server answers 202, or in parts when an older one refuses it as too much model
        work for its deadline: see CognisClient.add_memories)."""
        batch = [calls.as_memory_input(m) for m in memories]
        call = calls.add_memories(user_id, batch, idempotency_key)
        try:
            answer = await self._send(waiting(call, wait_for, wait_timeout_ms))
        except CognisError as refusal:
            parts = calls.split_batch(refusal, batch, idempotency_key)
            if parts is None:
                raise
        else:
            if answer.job_id is None:
                return answer.items or []
            job = await self.wait_for_batch_job(user_id, answer.job_id, timeout_s=job_timeout_s)
            return calls.batch_written(job)
        memories_out: list[Memory] = []
        for part, key in parts:
            memories_out += await self.add_memories(
                user_id,
                list(part),
                idempotency_key=key,
                wait_for=wait_for,
                wait_timeout_ms=wait_timeout_ms,
            )
        return memories_out

    async def get_memory(self, user_id: str, memory_id: Any) -> Memory:
        """By the memory's id, its current version (its last, `is_current` False, once
        deleted); by a version's id, that version."""
        return await self._send(calls.get_memory(user_id, memory_id))

    async def list_memories(self, user_id: str, **options: Unpack[ListOptions]) -> MemoryPage:
        """One page of memories, newest first; `next_cursor` leads to the next."""
        return await self._send(calls.list_memories(user_id, options))

    async def iter_memories(
        self, user_id: str, *, page_size: int = 100, **filters: Unpack[MemoryFilters]
    ) -> AsyncIterator[Memory]:
        """Every memory matching the filters of `list_memories`, page after page."""
        cursor = None
        while True:
            page = await self.list_memories(user_id, limit=page_size, cursor=cursor, **filters)
            for memory in page.items:
                yield memory
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    async def update_memory(
        self,
        user_id: str,
        memory_id: Any,
        *,
        if_match: Memory | Any | None = None,
        idempotency_key: str | None = None,
        wait_for: WaitFor | None = None,
        wait_timeout_ms: int | None = None,
        **changes: Any,
    ) -> Memory:
        """A new version of the memory `memory_id` (its id, or any of its versions') with the
        fields of `MemoryChanges` given as keywords changed; it keeps the memory's `id`.
        `if_match`: the version read (a Memory, or a version id): PreconditionFailedError
        (412) instead when another writer has replaced it since. Without it, the update
        applies to whichever version is current."""
        changed = MemoryChanges(**changes)
        call = calls.update_memory(user_id, memory_id, changed, idempotency_key, if_match)
        return await self._send(waiting(call, wait_for, wait_timeout_ms))

    async def delete_memory(
        self,
        user_id: str,
        memory_id: Any,
        *,
        if_match: Memory | Any | None = None,
        idempotency_key: str | None = None,
        wait_for: WaitFor | None = None,
        wait_timeout_ms: int | None = None,
    ) -> Memory:
        """End the memory `memory_id` (its id, or any of its versions'): its current version,
        returned, ends; its history stays. `if_match` as for `update_memory`."""
        call = calls.delete_memory(user_id, memory_id, idempotency_key, if_match)
        return await self._send(waiting(call, wait_for, wait_timeout_ms))

    async def delete_memories(
        self,
        user_id: str,
        *,
        idempotency_key: str | None = None,
        wait_for: WaitFor | None = None,
        wait_timeout_ms: int | None = None,
        **filters: Unpack[DeleteFilters],
    ) -> MemoriesDeleted:
        """End every memory the filters keep (`agent_id`/`run_id`: exactly that agent's or
        run's), as `delete_memory` ends one: each keeps its history. No filter: `all=True`,
        every memory of the user. Not an erase (`erase_user` removes everything)."""
        call = calls.delete_memories(user_id, filters, idempotency_key)
        return await self._send(waiting(call, wait_for, wait_timeout_ms))

    async def history(self, user_id: str, memory_id: Any) -> History:
        """Every version of the memory, oldest first (by its id or any version's)."""
        return await self._send(calls.history(user_id, memory_id))

    async def search(
        self, user_id: str, query: str, **options: Unpack[SearchOptions]
    ) -> SearchResult:
        """The 8-stage retrieval; `explain=True` adds every stage's rank and score per hit."""
        return await self._send(calls.search(user_id, query, options))

    async def context(
        self, user_id: str, query: str | None = None, **options: Unpack[ContextOptions]
    ) -> Context:
        """A prompt-ready block within `max_tokens`: the query's hits, recent changes, then the
        user's stable facts (without a query, the last two), and the memories it cites."""
        return await self._send(calls.context(user_id, query, options))

    async def profile(self, user_id: str, **options: Unpack[ProfileOptions]) -> Profile:
        """The user's current memories by category, newest first, each with what it replaced."""
        return await self._send(calls.profile(user_id, options))

    async def entities(self, user_id: str, **options: Unpack[EntityOptions]) -> EntityPage:
        """A page of the named things of the user's memories, by name (docs/entities.md)."""
        return await self._send(calls.entities(user_id, options))

    async def entity_memories(
        self, user_id: str, entity_id: Any, **options: Unpack[EntityMemoryOptions]
    ) -> EntityMemories:
        """An entity and the current memories that name it, newest first."""
        return await self._send(calls.entity_memories(user_id, entity_id, options))

    async def add_messages(
        self,
        user_id: str,
        messages: list[Message | str | dict[str, Any]],
        *,
        wait: bool = False,
        idempotency_key: str | None = None,
        wait_for: WaitFor | None = None,
        wait_timeout_ms: int | None = None,
    ) -> Job:
        """Messages for ingestion: the job, finished with `wait=True` (then `wait_for=
        "indexed"` also waits until its memories are searchable), else queued: see
        `wait_for_job`."""
        batch = calls.as_messages(messages)
        call = calls.add_messages(user_id, batch, wait=wait, key=idempotency_key)
        return await self._send(waiting(call, wait_for, wait_timeout_ms))

    async def dry_run(self, user_id: str, messages: list[Message | str | dict[str, Any]]) -> DryRun:
        """What ingestion would decide for these messages (ADD, UPDATE, DELETE, NONE), with
        nothing written."""
        return await self._send(calls.dry_run(user_id, calls.as_messages(messages)))

    async def import_memories(
        self,
        user_id: str,
        lines: Iterable[dict[str, Any] | str] | bytes,
        *,
        line_format: ImportFormat = "auto",
        batch_size: int | None = None,
    ) -> ImportSummary:
        """Import a user's history: JSON Lines (dicts, JSON strings, or the bytes of a file)
        in the import's line format (`export`'s, or mem0's). Idempotent by `external_id`: a
        rerun skips what landed. Bad lines are reported in the summary, not raised."""
        call = calls.import_memories(user_id, lines, line_format, batch_size)
        return await self._send(call)

    async def get_job(self, user_id: str, job_id: Any) -> Job:
        return await self._send(calls.get_job(user_id, job_id))

    async def get_batch_job(self, user_id: str, job_id: Any) -> BatchJob:
        """A batch create's job (a 202's), with its memories once done."""
        return await self._send(calls.get_batch_job(user_id, job_id))

    async def wait_for_batch_job(
        self,
        user_id: str,
        job_id: Any,
        *,
        timeout_s: float = BATCH_JOB_TIMEOUT_S,
        poll_s: float = JOB_POLL_S,
    ) -> BatchJob:
        """The batch job once it is done or failed; JobNotFinishedError after `timeout_s`."""
        wait = _JobWait(timeout_s, poll_s)
        while True:
            job = await self.get_batch_job(user_id, job_id)
            if wait.finished(job):
                return job
            await asyncio.sleep(poll_s)

    async def wait_for_job(
        self, user_id: str, job_id: Any, *, timeout_s: float = 60.0, poll_s: float = JOB_POLL_S
    ) -> Job:
        """The job once it is done or failed (its status polled every `poll_s`);
        JobNotFinishedError, carrying the last status, after `timeout_s`."""
        wait = _JobWait(timeout_s, poll_s)
        while True:
            job = await self.get_job(user_id, job_id)
            if wait.finished(job):
                return job
            await asyncio.sleep(poll_s)

    async def erase_user(
        self, user_id: str, *, agent_id: str | None = None, run_id: str | None = None
    ) -> Erasure:
        """Erase the user from both stores; given agent_id and/or run_id, only the memories
        and messages of exactly that agent and/or run (the shared ones stay)."""
        return await self._send(calls.erase_user(user_id, agent_id, run_id))

    async def export(self, user_id: str, **options: Unpack[ExportOptions]) -> bytes:
        """The user's memories as JSON Lines in the import's line format (read whole)."""
        return await self._send(calls.export(user_id, options))

    async def list_users(
        self, *, prefix: str | None = None, limit: int | None = None, cursor: str | None = None
    ) -> UserPage:
        """One page of the tenant's users (by id), with memory counts and last change."""
        return await self._send(calls.list_users(prefix, limit, cursor))
