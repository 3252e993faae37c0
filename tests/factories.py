"""Plain helper functions the tests share."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
from opensearchpy import AsyncOpenSearch
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine


async def create_memory(
    client: httpx.AsyncClient, user_id: str, content: str, **fields: Any
) -> dict:
    response = await client.post(
        f"/v1/users/{user_id}/memories", json={"content": content, **fields}
    )
    assert response.status_code == 201, response.text
    return response.json()


async def search(client: httpx.AsyncClient, user_id: str, query: str, **fields: Any) -> dict:
    """Search with explanations on (so tests can read each stage's rank and score)."""
    body = {"query": query, "explain": True, **fields}
    response = await client.post(f"/v1/users/{user_id}/search", json=body)
    assert response.status_code == 200, response.text
    return response.json()


async def indexed_document(opensearch: AsyncOpenSearch, index: str, memory_id: str) -> dict | None:
    response = await opensearch.get(index=index, id=memory_id, ignore=[404])
    return response if response.get("found") else None


async def user_row_counts(db: AsyncEngine, user_id: str) -> dict[str, int]:
    async with db.connect() as connection:
        counts = {}
        for table in ("memories", "messages", "outbox"):
            counts[table] = (
                await connection.execute(
                    text(f"SELECT count(*) FROM {table} WHERE user_id = :u"),  # noqa: S608
                    {"u": user_id},
                )
            ).scalar_one()
        return counts


def stage_rank(hit: dict, stage: str) -> int | None:
    """A result's rank at one stage of the explanation (None: not in that stage's list)."""
    entry = hit["explanation"].get(stage)
    return None if entry is None else entry["rank"]


@contextlib.asynccontextmanager
async def deployment_category(
    db: AsyncEngine,
    client: httpx.AsyncClient,
    *user_ids: str,
    examples: tuple[str, ...] = (),
) -> AsyncIterator[str]:
    """A category of the test's own, added as a deployment adds one (a row of `categories`,
    under a unique name). On exit the users who filed memories under it are erased and the row
    removed, so no other test sees it."""
    name = f"zz_{uuid.uuid4().hex[:12]}"
    async with db.begin() as connection:
        await connection.execute(
            text("INSERT INTO categories (name, description, examples) VALUES (:n, :d, :e)"),
            {"n": name, "d": f"Test category {name}", "e": list(examples)},
        )
    try:
        yield name
    finally:
        for user_id in user_ids:
            erased = await client.delete(f"/v1/users/{user_id}")
            assert erased.status_code == 200, erased.text
        async with db.begin() as connection:
            await connection.execute(text("DELETE FROM categories WHERE name = :n"), {"n": name})


# Batch creates answered 202 (app/memories/batch_jobs.py): rows of a user, counted together.
BATCH_COUNTS = text(
    "SELECT (SELECT count(*) FROM memories WHERE user_id = :u) AS memories,"
    " (SELECT count(*) FROM outbox WHERE user_id = :u AND op = 'index') AS outbox,"
    " (SELECT count(*) FROM batch_jobs WHERE user_id = :u) AS jobs"
)


def short_batch(label: str, n: int = 12) -> list[dict]:
    """`n` memories of 100 characters each."""
    return [{"content": f"{label} note {i:02}: " + "y" * 80} for i in range(n)]


async def queued_batch_job(client: httpx.AsyncClient, user_id: str, label: str) -> httpx.Response:
    """A batch create of `short_batch(label)` answered 202 (under the `slow_estimate` fixture:
    more model work than the bulk deadline), nothing written yet."""
    accepted = await client.post(
        f"/v1/users/{user_id}/memories/batch", json={"memories": short_batch(label)}
    )
    assert accepted.status_code == 202, accepted.text
    return accepted


@contextlib.asynccontextmanager
async def running_batch_worker(runtime: Any) -> AsyncIterator[None]:
    """The in-process API's batch job worker, for the block (it finishes its job on leaving)."""
    stop = asyncio.Event()
    task = asyncio.create_task(runtime.batch_worker.run_forever(stop))
    try:
        yield
    finally:
        stop.set()
        await task


async def finished_batch_job(client: httpx.AsyncClient, location: str, within_s: float) -> dict:
    """The job read at its Location until it is done or failed (as a client polls it)."""
    deadline = time.monotonic() + within_s
    while True:
        response = await client.get(location)
        assert response.status_code == 200, response.text
        job = response.json()
        if job["status"] in ("done", "failed"):
            return job
        assert time.monotonic() < deadline, f"job still {job['status']} after {within_s} s"
        await asyncio.sleep(0.2)


async def spoil_batch_job(db: AsyncEngine, job_id: str, position: int) -> None:
    """Make one memory of a queued job's kept batch name an unknown category, as a category
    deleted after the request was accepted would: the job fails for good when it runs."""
    async with db.begin() as connection:
        await connection.execute(
            text(
                "UPDATE batch_jobs SET batch = jsonb_set(batch, CAST(:path AS text[]), "
                "'\"no_such_category\"') WHERE id = :id"
            ),
            {"path": [str(position), "category"], "id": job_id},
        )


async def hold_user_lock(
    connection: AsyncConnection, tenant_id: object, user_id: str, mode: str = "UPDATE"
) -> None:
    """Take the user's row of user_locks in `connection`'s transaction, until it ends, as an
    erase does (FOR UPDATE) or a write (FOR KEY SHARE): app/memories/user_lock.py."""
    tenant = {"t": str(tenant_id), "u": user_id}
    set_tenant = text("SELECT set_config('cognis.tenant_id', :t, true)")
    # The row committed first, as for a user who has written before: a row this transaction
    # made would hold every lock mode of the user until it ends (theirs wait at the key).
    async with connection.engine.begin() as maker:
        await maker.execute(set_tenant, tenant)
        await maker.execute(
            text("INSERT INTO user_locks VALUES (CAST(:t AS uuid), :u) ON CONFLICT DO NOTHING"),
            tenant,
        )
    await connection.execute(set_tenant, tenant)
    lock = "SELECT 1 FROM user_locks WHERE tenant_id = CAST(:t AS uuid) AND user_id = :u FOR "
    await connection.execute(text(lock + mode), tenant)


async def blocked_by(connection: AsyncConnection) -> int:
    """How many other sessions wait for a lock `connection` holds: directly, or behind one
    that does (the second waiter for a row waits for the first, which holds the row's
    tuple lock)."""
    # pg_stat_activity is read once per transaction unless its snapshot is dropped.
    await connection.execute(text("SELECT pg_stat_clear_snapshot()"))
    blocked = await connection.scalar(
        text(
            "WITH direct AS (SELECT pid FROM pg_stat_activity"
            " WHERE pg_backend_pid() = ANY(pg_blocking_pids(pid)))"
            " SELECT count(*) FROM pg_stat_activity AS a WHERE a.pid IN (SELECT pid FROM direct)"
            " OR pg_blocking_pids(a.pid) && ARRAY(SELECT pid FROM direct)"
        )
    )
    return int(blocked or 0)
