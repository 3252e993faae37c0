"""Write deadlines (app/api/deadlines.py): a write that cannot be done in time is answered 503
with Retry-After, and nothing of it is written, neither when its texts wait for a busy model
nor when the deadline passes while it waits for the user's write lock. A message submit makes
no model call: it answers 202 while the model is busy, and the worker embeds later.

The model is held busy by a first call that waits on a threading.Event: the writes behind it
cannot start within their deadline however fast the machine is."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncIterator

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app import vocabulary
from app.api.deadlines import DEADLINE_HEADER
from app.db.tenant import DEFAULT_TENANT_ID
from app.ml.scheduling.dispatcher import MicroBatcher
from app.ml.scheduling.work import Work, WorkClass
from tests.conftest import InProcessApi, wait_until
from tests.factories import blocked_by, hold_user_lock
from tests.ingest.helpers import current_memories, decisions, wait_job

BUSY = "the model is busy with this"
COUNTS = text(
    "SELECT (SELECT count(*) FROM memories WHERE user_id = :u) AS memories,"
    " (SELECT count(*) FROM outbox WHERE user_id = :u) AS outbox,"
    " (SELECT count(*) FROM messages WHERE user_id = :u) AS messages,"
    " (SELECT count(*) FROM ingest_tasks WHERE user_id = :u) AS tasks"
)


@contextlib.asynccontextmanager
async def busy_model(
    batcher: MicroBatcher, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[list[str]]:
    """The model inside a call that lasts until the block ends; yields every text the model
    is given, during the block and after it (until the test ends)."""
    started, released = threading.Event(), threading.Event()
    encode, seen = batcher._encode, []

    def recorded(texts: list[str]):
        seen.extend(texts)
        if BUSY in texts:
            started.set()
            released.wait(60)
        return encode(texts)

    monkeypatch.setattr(batcher, "_encode", recorded)
    blocker = asyncio.create_task(batcher.submit([BUSY], Work(WorkClass.BULK)))
    try:
        await asyncio.to_thread(started.wait, 30)
        yield seen
    finally:
        released.set()
        await blocker


def assert_refused(response: httpx.Response, deadline_ms: int) -> None:
    assert response.status_code == 503, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    assert int(response.headers["retry-after"]) > 0
    problem = response.json()
    assert problem["title"] == "Deadline exceeded"
    assert problem["deadline_ms"] == deadline_ms
    assert "nothing was written" in problem["detail"]


async def test_writes_that_cannot_start_in_time_are_refused_and_write_nothing(
    client: httpx.AsyncClient,
    inprocess_api: InProcessApi,
    ingest_worker: None,
    db: AsyncEngine,
    user_id: str,
    other_user_id: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    created = await client.post(
        f"/v1/users/{other_user_id}/memories", json={"content": "Ada keeps two cats."}
    )
    assert created.status_code == 201, created.text
    memory_id = created.json()["id"]
    deadline = {DEADLINE_HEADER: "50"}

    batcher = inprocess_api.app.state.runtime.embedder.batcher
    async with busy_model(batcher, monkeypatch) as seen:
        single = await client.post(
            f"/v1/users/{user_id}/memories",
            json={"content": "Ada moved to Porto.", "category": "personal_details"},
            headers=deadline,
        )
        batch = await client.post(
            f"/v1/users/{user_id}/memories/batch",
            json={"memories": [{"content": "Ada speaks Portuguese."}]},
            headers=deadline,
        )
        message = await client.post(
            f"/v1/users/{user_id}/messages",
            json={"messages": [{"content": "I adopted a third cat."}]},
            # Time for its statements on a loaded machine, none for the model's call.
            headers={DEADLINE_HEADER: "5000"},
        )
        # Step 1 is durable before the answer, with the model still busy.
        assert message.status_code == 202, message.text
        async with db.connect() as conn:
            stored = await conn.scalar(
                text("SELECT content FROM messages WHERE user_id = :u"), {"u": user_id}
            )
        assert stored == "I adopted a third cat."
        assert "I adopted a third cat." not in seen
        update = await client.patch(
            f"/v1/users/{other_user_id}/memories/{memory_id}",
            json={"content": "Ada keeps three cats."},
            headers=deadline,
        )

    for response in (single, batch, update):
        assert_refused(response, 50)
    async with db.connect() as conn:
        written = await conn.execute(
            text(
                "SELECT content FROM memories WHERE user_id = :u"
                " UNION ALL SELECT payload::text FROM outbox WHERE user_id = :u"
            ),
            {"u": user_id},
        )
        # The refused writes left nothing (the message's memory may be there already).
        assert not [c for (c,) in written if "Porto" in c or "Portuguese" in c]
        versions = await conn.execute(
            text("SELECT content, is_current FROM memories WHERE user_id = :u"),
            {"u": other_user_id},
        )
        assert list(versions) == [("Ada keeps two cats.", True)]
    # The refused texts left the queue unembedded; the same write, sent again, goes through.
    retried = await client.post(
        f"/v1/users/{user_id}/memories", json={"content": "Ada moved to Porto."}
    )
    assert retried.status_code == 201, retried.text
    refused = {"Ada speaks Portuguese.", "Ada keeps three cats."}
    assert not refused & set(seen)
    assert seen.count("Ada moved to Porto.") == 1
    # The model free again, the worker embeds the message and makes its memory.
    job = await wait_job(client, user_id, message.json()["job_id"])
    assert job["state"] == "done", job
    assert "I adopted a third cat." in seen
    made = {d["content"] for d in decisions(job) if d["operation"] == "ADD"}
    assert made, job
    assert made <= {m["content"] for m in await current_memories(client, user_id)}


async def test_a_deadline_that_passes_while_waiting_for_the_lock_commits_nothing(
    client: httpx.AsyncClient, db: AsyncEngine, user_id: str
) -> None:
    """A PATCH of metadata only (no model work) waits for the user's write lock, held (as an
    erase holds it) until its deadline has passed: the new version is rolled back, not
    committed late."""
    created = await client.post(
        f"/v1/users/{user_id}/memories", json={"content": "Ada keeps two cats."}
    )
    assert created.status_code == 201, created.text
    deadline_ms = 2000
    async with db.connect() as holder:
        transaction = await holder.begin()
        await hold_user_lock(holder, DEFAULT_TENANT_ID, user_id)
        started = time.monotonic()
        write = asyncio.create_task(
            client.patch(
                f"/v1/users/{user_id}/memories/{created.json()['id']}",
                json={"metadata": {"source": "late"}},
                headers={DEADLINE_HEADER: str(deadline_ms)},
            )
        )

        async def waiting_for_the_lock() -> bool:
            return await blocked_by(holder) > 0

        await wait_until(waiting_for_the_lock, timeout=deadline_ms / 1000, interval=0.02)
        # The deadline passes while the write waits (the condition this test is about).
        await asyncio.sleep(started + deadline_ms / 1000 + 0.05 - time.monotonic())
        await transaction.rollback()
        response = await write

    assert_refused(response, deadline_ms)
    async with db.connect() as conn:
        rows = await conn.execute(
            text("SELECT metadata, is_current FROM memories WHERE user_id = :u"), {"u": user_id}
        )
        assert list(rows) == [({}, True)]
        counts = (await conn.execute(COUNTS, {"u": user_id})).one()
        assert (counts.memories, counts.outbox) == (1, 1)


async def test_a_deadline_header_must_be_a_positive_number_of_ms(
    client: httpx.AsyncClient, user_id: str
) -> None:
    for value in ("soon", "0", "-5"):
        response = await client.post(
            f"/v1/users/{user_id}/memories",
            json={"content": "Ada moved to Porto."},
            headers={DEADLINE_HEADER: value},
        )
        assert response.status_code == 400, response.text
        assert response.headers["content-type"].startswith("application/problem+json")
        assert response.json()["field"] == DEADLINE_HEADER


async def test_a_batch_that_cannot_fit_its_whole_deadline_is_accepted_as_a_job_at_once(
    client: httpx.AsyncClient,
    inprocess_api: InProcessApi,
    db: AsyncEngine,
    user_id: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Waiting and retrying could never make it fit, and refusing it (413) would make the
    client shrink a valid batch: 202 with a job at once, and the model never sees it during
    the request (tests/api/test_batch_jobs.py runs such jobs). The batcher's learnt speed is
    fixed at 100 ms a character (10 s a text here)."""
    batcher = inprocess_api.app.state.runtime.embedder.batcher
    monkeypatch.setattr(batcher, "seconds_per_unit", 0.1)
    monkeypatch.setattr(batcher, "_learn", lambda cost, seconds: None)
    encode, seen = batcher._encode, []
    monkeypatch.setattr(batcher, "_encode", lambda texts: seen.extend(texts) or encode(texts))
    memories = [{"content": f"Ada's note {i:03}: " + "x" * 84} for i in range(30)]  # 100 chars

    response = await client.post(
        f"/v1/users/{user_id}/memories/batch",
        json={"memories": memories},
        headers={DEADLINE_HEADER: "40000"},
    )

    assert response.status_code == 202, response.text
    assert "retry-after" not in response.headers
    job = response.json()
    assert (job["status"], job["memories"]) == ("queued", 30)
    assert response.headers["location"].endswith(f"/memories/batch/jobs/{job['job_id']}")
    assert seen == []
    async with db.connect() as conn:
        assert tuple(await conn.execute(COUNTS, {"u": user_id})) == ((0, 0, 0, 0),)

    # What fits (20 s of the 40 by the estimate; the model is much faster) is done.
    fitting = await client.post(
        f"/v1/users/{user_id}/memories/batch",
        json={"memories": memories[:2]},
        headers={DEADLINE_HEADER: "40000"},
    )
    assert fitting.status_code == 201, fitting.text
    # A single write is never refused for its size: it is one text, and a busy model passes.
    single = await client.post(
        f"/v1/users/{user_id}/memories",
        json={"content": memories[0]["content"]},
        headers={DEADLINE_HEADER: "40000"},
    )
    assert single.status_code == 201, single.text


async def test_a_chat_back_ends_batch_of_the_maximum_size_is_accepted_on_an_idle_model(
    client: httpx.AsyncClient, inprocess_api: InProcessApi, db: AsyncEngine, user_id: str
) -> None:
    """100 memories (the published maximum) of 280 characters, 28 KB as a chat back end sends
    them, with the speed the batcher plans with learnt from real calls first: the model's own,
    not a contended mean (which refused such a batch as 188 s of model time), so the batch is
    not refused for its size and is written whole. The speed is learnt from eight calls, as
    a server learns it over its first minutes: one call made while the other test worker
    kept both cores busy once taught a speed at which the batch looked longer than the
    55 s deadline."""
    batcher = inprocess_api.app.state.runtime.embedder.batcher
    turn = "Ada told Ben about the tide pools, the herons and the old lighthouse keeper's log. "
    for call in range(8):
        warm = [{"content": f"{call} {i} {turn * 6}", "category": "hobbies"} for i in range(3)]
        warmed = await client.post(f"/v1/users/{user_id}/memories/batch", json={"memories": warm})
        assert warmed.status_code == 201, warmed.text
    assert batcher.seconds_per_unit is not None  # learnt: the size check below is real

    memories = [
        {"content": f"Turn {i:03}: {turn * 4}"[:280], "speaker": "Ada", "category": "hobbies"}
        for i in range(vocabulary.MAX_BATCH_ITEMS)
    ]
    assert sum(len(m["content"]) for m in memories) == 28_000
    response = await client.post(
        f"/v1/users/{user_id}/memories/batch", json={"memories": memories}, timeout=120
    )

    assert response.status_code == 201, response.text
    assert len(response.json()["items"]) == vocabulary.MAX_BATCH_ITEMS
    async with db.connect() as conn:
        counts = (await conn.execute(COUNTS, {"u": user_id})).one()
    assert (counts.memories, counts.outbox) == (124, 124)
