"""Batch creates that need more model time than their deadline (issue 34): answered 202 with a
durable job instead of being refused (413), written later by a worker in one transaction as a
201 would have been, with the same outbox rows; the job read back by its user only.

The worker runs in this process only while a test holds `running_batch_worker`: the 202 is
checked before anything could have been written."""

from __future__ import annotations

import asyncio
import uuid

import httpx
import pytest
from opensearchpy import AsyncOpenSearch
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.api.deadlines import DEADLINE_HEADER
from app.ml.scheduling.speed import character_costs
from app.runtime import Runtime
from tests.conftest import InProcessApi, wait_until
from tests.factories import (
    BATCH_COUNTS,
    finished_batch_job,
    queued_batch_job,
    running_batch_worker,
    spoil_batch_job,
)
from tests.tenants.helpers import new_tenant, tenant_client

MAX_BATCH = 100
MAX_CHARS = 8000
KEPT_BATCH = text("SELECT batch FROM batch_jobs WHERE user_id = :u")


def long_text(i: int) -> str:
    """A memory of the maximum length, unique by its first words."""
    head = f"Ledger page {i:03} of Ada's lighthouse log, word marker zq{i:03}x. "
    body = "The keeper noted the tide, the wind, the herons and the passing ships. "
    return (head + body * (MAX_CHARS // len(body)))[:MAX_CHARS]


async def test_a_batch_of_the_maximum_size_of_long_texts_is_accepted_and_written_by_a_job(
    client: httpx.AsyncClient,
    inprocess_api: InProcessApi,
    db: AsyncEngine,
    opensearch: AsyncOpenSearch,
    index_name: str,
    user_id: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """100 memories of 8,000 characters, on an idle service. With all-mpnet-base-v2 on 2 cores
    they need about 88 s of model time, more than the default bulk deadline of 55 s; so that
    the job path is taken wherever this runs (a faster machine fits them in 55 s), the request
    carries a deadline (X-Cognis-Deadline-Ms) of half the model time the batcher's learnt speed
    says they need. The idempotent retry of the 202 replays it, and queues nothing twice."""
    runtime: Runtime = inprocess_api.app.state.runtime
    batcher = runtime.embedder.batcher
    warm = [{"content": long_text(900 + i), "category": "hobbies"} for i in range(4)]
    warmed = await client.post(f"/v1/users/{user_id}/memories/batch", json={"memories": warm})
    assert warmed.status_code == 201, warmed.text
    assert batcher.seconds_per_unit is not None  # learnt: the size check below is real
    contents = [long_text(i) for i in range(MAX_BATCH)]
    needed_s = batcher.model_seconds(character_costs(contents))
    deadline_ms = max(1, int(needed_s * 1000 / 2))
    encode, seen = batcher._encode, []
    monkeypatch.setattr(batcher, "_encode", lambda texts: seen.extend(texts) or encode(texts))
    request = {
        "json": {"memories": [{"content": c} for c in contents]},
        "headers": {DEADLINE_HEADER: str(deadline_ms), "Idempotency-Key": f"big-{user_id}"},
    }

    accepted = await client.post(f"/v1/users/{user_id}/memories/batch", **request)

    assert accepted.status_code == 202, accepted.text
    job = accepted.json()
    assert (job["status"], job["memories"], job["attempts"], job["items"]) == (
        "queued",
        MAX_BATCH,
        0,
        None,
    )
    location = f"/v1/users/{user_id}/memories/batch/jobs/{job['job_id']}"
    assert accepted.headers["location"] == location
    assert seen == []  # refused for the deadline before any model work, and nothing written
    async with db.connect() as conn:
        assert tuple(await conn.execute(BATCH_COUNTS, {"u": user_id})) == ((4, 4, 1),)

    replayed = await client.post(f"/v1/users/{user_id}/memories/batch", **request)
    assert replayed.status_code == 202, replayed.text
    assert replayed.headers["idempotency-replayed"] == "true"
    assert replayed.headers["location"] == location
    assert replayed.content == accepted.content

    async with running_batch_worker(runtime):
        done = await finished_batch_job(client, location, within_s=900)

    assert (done["status"], done["attempts"], done["error"]) == ("done", 1, None), done
    assert done["finished_at"] is not None
    items = done["items"]
    assert [m["content"] for m in items] == contents
    assert {(m["user_id"], m["version"], m["is_current"]) for m in items} == {(user_id, 1, True)}
    assert len(set(contents) & set(seen)) == MAX_BATCH  # embedded by the job, each once
    async with db.connect() as conn:
        assert tuple(await conn.execute(BATCH_COUNTS, {"u": user_id})) == (
            (4 + MAX_BATCH, 4 + MAX_BATCH, 1),
        )
        outbox_ids = set(
            (
                await conn.execute(
                    text("SELECT memory_id FROM outbox WHERE user_id = :u AND op = 'index'"),
                    {"u": user_id},
                )
            ).scalars()
        )
    assert {uuid.UUID(m["id"]) for m in items} <= outbox_ids
    # Read back as the memories they are; and all of them searchable once the relay has run.
    first = await client.get(f"/v1/users/{user_id}/memories/{items[0]['id']}")
    assert first.status_code == 200 and first.json() == items[0]

    async def all_indexed() -> bool:
        await opensearch.indices.refresh(index=index_name)
        found = await opensearch.count(
            index=index_name, body={"query": {"term": {"user_id": user_id}}}
        )
        return found["count"] == 4 + MAX_BATCH

    await wait_until(all_indexed, timeout=120)
    # The words of each are in the BM25 index: the one memory that names its marker is found.
    found = await opensearch.search(
        index=index_name,
        body={
            "query": {
                "bool": {
                    "filter": [{"term": {"user_id": user_id}}],
                    "must": [{"match": {"content": "zq057x"}}],
                }
            }
        },
    )
    assert [h["_id"] for h in found["hits"]["hits"]] == [items[57]["id"]]


async def test_a_job_is_read_by_its_user_only(
    client: httpx.AsyncClient,
    admin: httpx.AsyncClient,
    inprocess_api: InProcessApi,
    slow_estimate: None,
    user_id: str,
    other_user_id: str,
) -> None:
    accepted = await queued_batch_job(client, user_id, "Ines")
    job_id = accepted.json()["job_id"]
    # The backlog /ready reports counts it (no worker runs here: it stays queued).
    assert (await client.get("/ready")).json()["batch_jobs_open"] >= 1
    location = accepted.headers["location"]
    mine = await client.get(location)
    assert mine.status_code == 200 and mine.json()["job_id"] == job_id

    # Another user of the same tenant, and the same user id in another tenant: not there.
    other_user = await client.get(f"/v1/users/{other_user_id}/memories/batch/jobs/{job_id}")
    assert other_user.status_code == 404, other_user.text
    assert other_user.headers["content-type"].startswith("application/problem+json")
    tenant = await new_tenant(admin, "batch-jobs")
    async with tenant_client(inprocess_api, tenant.key) as elsewhere:
        other_tenant = await elsewhere.get(location)
    assert other_tenant.status_code == 404, other_tenant.text
    assert other_tenant.json()["detail"] == other_user.json()["detail"].replace(
        other_user_id, user_id
    )
    unknown = await client.get(f"/v1/users/{user_id}/memories/batch/jobs/{uuid.uuid4()}")
    assert unknown.status_code == 404
    malformed = await client.get(f"/v1/users/{user_id}/memories/batch/jobs/not-a-job")
    assert (malformed.status_code, malformed.json()["field"]) == (400, "job_id")


async def test_a_job_is_written_once_by_workers_sharing_the_queue_and_erased_with_its_user(
    client: httpx.AsyncClient,
    inprocess_api: InProcessApi,
    db: AsyncEngine,
    slow_estimate: None,
    user_id: str,
    other_user_id: str,
) -> None:
    """Two jobs and two worker loops (as two processes would run them): each job is claimed
    by one (SKIP LOCKED) and written once; erasing a user deletes their job too."""
    runtime: Runtime = inprocess_api.app.state.runtime
    locations = []
    for user in (user_id, other_user_id):
        accepted = await queued_batch_job(client, user, user)
        locations.append(accepted.headers["location"])
    stop = asyncio.Event()
    loops = [asyncio.create_task(runtime.batch_worker.run_forever(stop)) for _ in range(2)]
    try:
        jobs = [await finished_batch_job(client, location, within_s=120) for location in locations]
    finally:
        stop.set()
        await asyncio.gather(*loops)
    assert [(j["status"], j["attempts"], len(j["items"])) for j in jobs] == [("done", 1, 12)] * 2
    async with db.connect() as conn:
        for user in (user_id, other_user_id):
            assert tuple(await conn.execute(BATCH_COUNTS, {"u": user})) == ((12, 12, 1),)
            # Done: the memories hold the content, the job none of it.
            assert await conn.scalar(KEPT_BATCH, {"u": user}) == []

    erased = await client.delete(f"/v1/users/{user_id}")
    assert erased.status_code == 200, erased.text
    assert erased.json()["postgres"]["batch_jobs"] == 1
    gone = await client.get(locations[0])
    assert gone.status_code == 404
    async with db.connect() as conn:
        assert tuple(await conn.execute(BATCH_COUNTS, {"u": user_id})) == ((0, 0, 0),)
        assert tuple(await conn.execute(BATCH_COUNTS, {"u": other_user_id})) == ((12, 12, 1),)


async def test_a_job_that_fails_for_good_says_why_and_writes_nothing(
    client: httpx.AsyncClient,
    inprocess_api: InProcessApi,
    db: AsyncEngine,
    slow_estimate: None,
    user_id: str,
) -> None:
    """Bad input found when the job runs (here: a category deleted meanwhile, simulated by
    editing the kept batch) fails the job at once with the error, and nothing is written."""
    runtime: Runtime = inprocess_api.app.state.runtime
    accepted = await queued_batch_job(client, user_id, "Ada")
    await spoil_batch_job(db, accepted.json()["job_id"], 3)
    async with running_batch_worker(runtime):
        failed = await finished_batch_job(client, accepted.headers["location"], within_s=120)
    assert (failed["status"], failed["attempts"], failed["items"]) == ("failed", 1, None)
    assert "InvalidInputError" in failed["error"] and "category" in failed["error"]
    assert failed["finished_at"] is not None
    async with db.connect() as conn:
        assert tuple(await conn.execute(BATCH_COUNTS, {"u": user_id})) == ((0, 0, 1),)
        assert await conn.scalar(KEPT_BATCH, {"u": user_id}) == []
