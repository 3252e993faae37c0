"""A batch that needs more model time than the server's deadline allows: this server accepts it
as a job (202), and the Python client (async in process, blocking against the API process)
waits for the job and returns its memories as a 201's; a failed job raises
BatchJobFailedError. An older server refused such a batch (413, in
memories): the client still sends it again in the parts the server says would fit, each its
own transaction with its own idempotency key.

The in-process API's learnt model speed is fixed at 100 ms a character (10 s a memory of 100
characters), so 12 memories are 120 s of model time by its estimate, against the 55 s bulk
deadline; the model itself is much faster, so every job and part it writes is done at once."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from cognis_client import AsyncCognisClient, BatchJobFailedError, CognisClient
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.conftest import API_KEY, ApiProcess, InProcessApi, wait_until
from tests.factories import running_batch_worker, spoil_batch_job


class OlderServer(httpx.AsyncBaseTransport):
    """The in-process API, except that a whole batch of more than `fitting` memories is refused
    as too much work (413 with `fitting_memories`), as servers before batch jobs answered."""

    def __init__(self, app: object, fitting: int) -> None:
        self._api = httpx.ASGITransport(app=app)  # type: ignore[arg-type]
        self._fitting = fitting

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.method == "POST" and request.url.path.endswith("/memories/batch"):
            body = await request.aread()
            if body.count(b'"content"') > self._fitting:
                problem = {
                    "type": "about:blank",
                    "title": "Too much work for the deadline",
                    "status": 413,
                    "detail": "too much model work for the deadline; nothing was written",
                    "fitting_memories": self._fitting,
                }
                return httpx.Response(413, json=problem)
        return await self._api.handle_async_request(request)


def _client(inprocess_api: InProcessApi, transport: httpx.AsyncBaseTransport | None = None):
    transport = transport or httpx.ASGITransport(app=inprocess_api.app)
    return AsyncCognisClient(inprocess_api.url, api_key=API_KEY, transport=transport)


async def _stored(db: AsyncEngine, user_id: str) -> tuple[int, list[str]]:
    async with db.connect() as conn:
        stored = await conn.scalar(
            text("SELECT count(*) FROM memories WHERE user_id = :u"), {"u": user_id}
        )
        keys = await conn.execute(
            text("SELECT key FROM idempotency_keys WHERE user_id = :u ORDER BY key"),
            {"u": user_id},
        )
        return stored, [row.key for row in keys]


async def test_the_client_returns_the_memories_of_a_batch_accepted_as_a_job(
    inprocess_api: InProcessApi, slow_estimate: None, db: AsyncEngine, user_id: str
) -> None:
    contents = [f"Ines's note {i:02}: " + "y" * 84 for i in range(12)]
    key = f"job-{user_id}"

    async with (
        _client(inprocess_api) as cognis,
        running_batch_worker(inprocess_api.app.state.runtime),
    ):
        written = await cognis.add_memories(user_id, contents, idempotency_key=key)
        # The same logical write again: the 202 replays, its job is read, nothing is written.
        again = await cognis.add_memories(user_id, contents, idempotency_key=key)
        job_ids = await _job_ids(db, user_id)
        job = await cognis.get_batch_job(user_id, job_ids[0])

    assert [m.content for m in written] == contents
    assert {(m.user_id, m.version, m.is_current) for m in written} == {(user_id, 1, True)}
    assert [m.id for m in again] == [m.id for m in written]
    assert (job.status, job.items) == ("done", written)
    assert len(job_ids) == 1
    assert await _stored(db, user_id) == (12, [key])


async def _job_ids(db: AsyncEngine, user_id: str) -> list[str]:
    async with db.connect() as conn:
        rows = await conn.execute(
            text("SELECT id FROM batch_jobs WHERE user_id = :u"), {"u": user_id}
        )
        return [str(row.id) for row in rows]


async def test_a_failed_job_raises_and_nothing_is_written(
    inprocess_api: InProcessApi, slow_estimate: None, db: AsyncEngine, user_id: str
) -> None:
    """The job's kept batch is spoilt before a worker runs it (a category it names is made
    unknown), so it fails for good; the client waiting on it raises the job's error."""
    contents = [f"Ben's note {i:02}: " + "z" * 84 for i in range(12)]
    async with _client(inprocess_api) as cognis:
        waiting = asyncio.create_task(cognis.add_memories(user_id, contents))
        try:
            (job_id,) = await wait_until(lambda: _job_ids(db, user_id))
            await spoil_batch_job(db, job_id, 0)
            async with running_batch_worker(inprocess_api.app.state.runtime):
                with pytest.raises(BatchJobFailedError) as failed:
                    await waiting
        finally:
            waiting.cancel()
    assert str(failed.value.job.job_id) == job_id
    assert failed.value.job.status == "failed" and "category" in (failed.value.job.error or "")
    assert (await _stored(db, user_id))[0] == 0


async def test_the_client_splits_a_batch_an_older_server_refuses_into_parts_that_fit(
    inprocess_api: InProcessApi, db: AsyncEngine, user_id: str
) -> None:
    # 12 memories, of which the older server says 5 fit: the parts are 5, 5 and 2.
    contents = [f"Ines's note {i:02}: " + "y" * 84 for i in range(12)]
    key = f"split-{user_id}"
    older = OlderServer(inprocess_api.app, fitting=5)

    async with _client(inprocess_api, older) as cognis:
        written = await cognis.add_memories(user_id, contents, idempotency_key=key)
        # The same logical write again: every part replays, nothing is written twice.
        again = await cognis.add_memories(user_id, contents, idempotency_key=key)

    assert [m.content for m in written] == contents
    assert [m.id for m in again] == [m.id for m in written]
    # The refused whole left nothing behind, its key included.
    assert await _stored(db, user_id) == (12, [f"{key}:0", f"{key}:10", f"{key}:5"])


class DeadlineOnBatches(httpx.BaseTransport):
    """HTTP to the API, each batch create with `X-Cognis-Deadline-Ms` (as a client that waits
    that long sends it); every path asked for is recorded."""

    def __init__(self, deadline_ms: int) -> None:
        self._http = httpx.HTTPTransport()
        self._deadline_ms = deadline_ms
        self.paths: list[tuple[str, str]] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.paths.append((request.method, request.url.path))
        if request.method == "POST" and request.url.path.endswith("/memories/batch"):
            request.headers["X-Cognis-Deadline-Ms"] = str(self._deadline_ms)
        return self._http.handle_request(request)

    def close(self) -> None:
        self._http.close()


def _page(i: int) -> str:
    head = f"Page {i} of Ines's travel journal. "
    body = "She walked the harbour, counted the gulls and wrote it all down. " * 124
    return (head + body)[:7999].rstrip() + "."


def test_the_blocking_client_returns_the_memories_of_a_batch_accepted_as_a_job(
    api: ApiProcess, user_id: str
) -> None:
    """Against the API process (its own batch worker, the run's model service): 30 memories
    of 8,000 characters need tens of seconds of model time (26 s on 2 idle cores); with 5 s
    left to them, the model service's estimate says they cannot fit, so the API answers 202
    and its worker writes them. Not fewer: 12 (about twice the deadline by the estimate on an
    idle machine) were estimated to fit on a busy one, started, and ran out of the deadline
    (503) in a CI rehearsal."""
    with CognisClient(api.url, api_key=API_KEY) as warm:  # the model service learns its speed
        assert len(warm.add_memories(user_id, [_page(100), _page(101)])) == 2
    contents = [_page(i) for i in range(30)]
    transport = DeadlineOnBatches(5000)
    with CognisClient(api.url, api_key=API_KEY, transport=transport) as cognis:
        written = cognis.add_memories(user_id, contents)
        polls = [path for method, path in transport.paths if "/memories/batch/jobs/" in path]
        assert polls, transport.paths  # the 202 path: the client read the job
        job = cognis.get_batch_job(user_id, polls[0].rsplit("/", 1)[1])
    assert [m.content for m in written] == contents
    assert (job.status, job.memories, job.items) == ("done", 30, written)
