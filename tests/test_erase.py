"""Erasure removes every row and document of one user, and nothing of anyone else."""

from __future__ import annotations

import asyncio
import time

import pytest
from sqlalchemy import text

from tests.conftest import wait_until
from tests.factories import create_memory, indexed_document, user_row_counts

pytestmark = pytest.mark.usefixtures("ingest_worker")  # messages through the in-process API


async def test_erase_user_empties_both_stores_for_that_user_only(
    client, db, opensearch, index_name, user_id, other_user_id
) -> None:
    mine = [await create_memory(client, user_id, f"Erasable fact {i}") for i in range(3)]
    await client.patch(
        f"/v1/users/{user_id}/memories/{mine[0]['id']}", json={"content": "Erasable fact zero"}
    )
    theirs = await create_memory(client, other_user_id, "A fact that must survive")

    async def all_indexed():
        docs = [await indexed_document(opensearch, index_name, m["id"]) for m in [*mine, theirs]]
        return all(docs)

    await wait_until(all_indexed)
    await opensearch.indices.refresh(index=index_name)
    before = await user_row_counts(db, user_id)
    assert before["memories"] == 4
    assert before["outbox"] >= 4

    response = await client.delete(f"/v1/users/{user_id}")
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["postgres"]["memories"] == 4
    assert body["postgres"]["outbox"] == before["outbox"]
    assert body["opensearch_deleted"] == 4
    assert body["opensearch_pending"] is False

    assert await user_row_counts(db, user_id) == {"memories": 0, "messages": 0, "outbox": 0}
    count = await opensearch.count(index=index_name, body={"query": {"term": {"user_id": user_id}}})
    assert count["count"] == 0
    listed = (
        await client.get(f"/v1/users/{user_id}/memories", params={"include_superseded": "true"})
    ).json()
    assert listed["items"] == []

    # The other user keeps everything.
    assert (await user_row_counts(db, other_user_id))["memories"] == 1
    assert await indexed_document(opensearch, index_name, theirs["id"]) is not None
    kept = await client.get(f"/v1/users/{other_user_id}/memories/{theirs['id']}")
    assert kept.status_code == 200


async def quiet(db) -> bool:
    """No other session holds a lock on a table of this database now: none is inside a
    transaction that has touched one (pg_locks, unlike pg_stat_activity's state, shows every
    role's sessions to a role without pg_read_all_stats)."""
    async with db.connect() as connection:
        busy = await connection.scalar(
            text(
                "SELECT count(DISTINCT pid) FROM pg_locks WHERE pid <> pg_backend_pid()"
                " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
            )
        )
    return busy == 0


async def _write_until(client, user_id: str, kind: str, stop, log: list) -> None:
    """One writer: a write after another until `stop` is set, each logged with its outcome
    and the moment (monotonic) it was sent."""
    n = 0
    while not stop.is_set():
        n += 1
        if kind == "memory":
            request = client.post(
                f"/v1/users/{user_id}/memories", json={"content": f"Concurrent fact {kind} {n}"}
            )
        elif kind == "batch":
            request = client.post(
                f"/v1/users/{user_id}/memories/batch",
                json={"memories": [{"content": f"Batched fact {n} {i}"} for i in range(3)]},
            )
        else:
            request = client.post(
                f"/v1/users/{user_id}/messages",
                json={"messages": [{"content": f"I collect stamps from country {n}"}]},
            )
        sent = time.monotonic()
        response = await request
        log.append((kind, response.status_code, sent, response.text[:300]))


async def test_erase_is_final_under_concurrent_writes(
    client, db, opensearch, index_name, user_id
) -> None:
    """Writers (API memories, batches, messages that the ingestion worker turns into memories)
    run while the user is erased. Every write acknowledged before the erase's response is gone
    from both stores; every write still in flight is refused (409), so nothing of the user is
    left once the pipelines settle."""
    stop = asyncio.Event()
    log: list = []
    writers = [
        asyncio.create_task(_write_until(client, user_id, kind, stop, log))
        for kind in ("memory", "memory", "batch", "message", "message")
    ]

    async def some_acknowledged():
        return sum(1 for entry in log if entry[1] in (200, 201, 202)) >= 8

    try:
        await wait_until(some_acknowledged, timeout=120)
        erase = await client.delete(f"/v1/users/{user_id}")
        erased_at = time.monotonic()

        async def every_writer_answered_after_the_erase():  # they keep going after it answered
            answered = {(kind, n) for n, (kind, _, sent, _) in enumerate(log) if sent > erased_at}
            return {kind for kind, _ in answered} == {"memory", "batch", "message"} and len(
                answered
            ) >= len(writers)

        await wait_until(every_writer_answered_after_the_erase, timeout=120)
    finally:
        stop.set()
        await asyncio.gather(*writers)
    assert erase.status_code == 200, erase.text

    # Sent after the erase answered: refused. Sent before and answered after (in flight):
    # refused or erased, which the stores below show.
    after = [entry for entry in log if entry[2] > erased_at]
    assert after, "no write was sent after the erase"
    assert {status for _, status, _, _ in after} == {409}, after[:5]
    assert all("erased" in body for _, _, _, body in after)
    assert any(entry[1] in (200, 201, 202) for entry in log if entry[2] <= erased_at)

    async def settled():
        async with db.connect() as connection:
            open_tasks = await connection.scalar(
                text("SELECT count(*) FROM ingest_tasks WHERE user_id = :u"), {"u": user_id}
            )
            pending = await connection.scalar(
                text("SELECT count(*) FROM outbox WHERE user_id = :u AND processed_at IS NULL"),
                {"u": user_id},
            )
        return open_tasks == 0 and pending == 0

    await wait_until(settled, timeout=60)

    async def no_job_in_flight():  # a worker or relay that was mid-job has finished
        return await quiet(db)

    await wait_until(no_job_in_flight, timeout=60)
    assert await user_row_counts(db, user_id) == {"memories": 0, "messages": 0, "outbox": 0}
    async with db.connect() as connection:
        for table in ("ingest_tasks", "ingest_decisions"):
            count = await connection.scalar(
                text(f"SELECT count(*) FROM {table} WHERE user_id = :u"),  # noqa: S608
                {"u": user_id},
            )
            assert count == 0, table
    await opensearch.indices.refresh(index=index_name)
    count = await opensearch.count(index=index_name, body={"query": {"term": {"user_id": user_id}}})
    assert count["count"] == 0
    receipt = erase.json()
    assert receipt["writes_refused_until"] > receipt["erased_at"]
    assert "refused" in receipt["guarantee"]
