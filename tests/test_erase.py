"""Erasure removes every row and document of one user, and nothing of anyone else; a write
that began before the erase is refused, and every write sent after it is accepted: the user id
starts a new life at once."""

from __future__ import annotations

import asyncio
import time
from datetime import datetime
from typing import Any

import pytest
from sqlalchemy import text

from app.ml.scheduling.work import WorkClass
from tests.api.test_deadlines import busy_model
from tests.conftest import wait_until
from tests.factories import (
    create_memory,
    indexed_document,
    queued_batch_job,
    running_batch_worker,
    search,
    user_row_counts,
)
from tests.ingest.helpers import wait_job

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


async def everything_of(db, user_id: str) -> dict[str, int]:
    """Rows of the user in every table an erase empties, ingestion's queue included."""
    tables = ("memories", "messages", "outbox", "ingest_tasks", "ingest_decisions", "batch_jobs")
    async with db.connect() as connection:
        return {
            table: await connection.scalar(
                text(f"SELECT count(*) FROM {table} WHERE user_id = :u"),  # noqa: S608
                {"u": user_id},
            )
            for table in tables
        }


async def test_an_erased_user_id_takes_new_writes_at_once(
    client, db, opensearch, index_name, user_id
) -> None:
    """Erase, then a new life: the first write after the erase's response is accepted (no
    window), found by search and listed alone; its messages are ingested again; and an id that
    never existed can be erased and written at once too."""
    old = await create_memory(client, user_id, "Ada keeps bees on the roof")
    erased = await client.delete(f"/v1/users/{user_id}")
    assert erased.status_code == 200, erased.text
    receipt = erased.json()
    assert receipt["writes_refused_until"] is None
    assert "sent after this response, is accepted" in receipt["guarantee"]

    created = await client.post(
        f"/v1/users/{user_id}/memories",
        json={"content": "Ada keeps goats in the valley"},
        params={"wait_for": "indexed"},
    )
    assert created.status_code == 201, created.text
    new = created.json()
    found = await search(client, user_id, "Where does Ada keep animals?", consistency="indexed")
    assert [hit["memory"]["id"] for hit in found["results"]] == [new["id"]]
    listed = await client.get(
        f"/v1/users/{user_id}/memories", params={"include_superseded": "true"}
    )
    assert [m["id"] for m in listed.json()["items"]] == [new["id"]]
    assert (await client.get(f"/v1/users/{user_id}/memories/{old['id']}")).status_code == 404
    assert await indexed_document(opensearch, index_name, old["version_id"]) is None

    submitted = await client.post(
        f"/v1/users/{user_id}/messages", json={"messages": [{"content": "I play the cello"}]}
    )
    assert submitted.status_code == 202, submitted.text
    job = await wait_job(client, user_id, submitted.json()["job_id"])
    assert job["state"] == "done", job
    ingested = await client.get(f"/v1/users/{user_id}/memories")
    assert len(ingested.json()["items"]) == 2

    never = f"{user_id}-never-written"
    assert (await client.delete(f"/v1/users/{never}")).status_code == 200
    await create_memory(client, never, "A first fact, right after an erase of nobody")


async def test_writes_that_began_before_the_erase_are_refused_or_dropped(
    client, inprocess_api, db, slow_estimate, user_id, monkeypatch
) -> None:
    """Work that began before the erase and reaches Postgres after it, held up by a busy model:
    a POST of a memory (409 `User erased`, nothing written), a message its worker had claimed
    and a batch job its worker had claimed (both dropped: their rows went with the user).
    Sent again after the erase, each is accepted."""
    runtime = inprocess_api.app.state.runtime
    batcher = runtime.embedder.batcher
    path = f"/v1/users/{user_id}"
    await create_memory(client, user_id, "Ada lives in Lisbon")
    async with running_batch_worker(runtime):
        async with busy_model(batcher, monkeypatch):
            waiting = {c: batcher.queued(c) for c in WorkClass}
            in_flight = asyncio.create_task(
                client.post(f"{path}/memories", json={"content": "Ada moved to Porto"})
            )
            message = await client.post(
                f"{path}/messages", json={"messages": [{"content": "I adopted a parrot"}]}
            )
            assert message.status_code == 202, message.text
            job = await queued_batch_job(client, user_id, "Ada")

            async def all_three_wait_for_the_model() -> bool:
                # The POST's text and the message's (its worker claimed it), interactive; the
                # job's 12 (its worker claimed it), bulk.
                more = {c: batcher.queued(c) - waiting[c] for c in WorkClass}
                return more[WorkClass.INTERACTIVE] >= 2 and more[WorkClass.BULK] >= 12

            await wait_until(all_three_wait_for_the_model, timeout=60)
            erased = await client.delete(path)
            assert erased.status_code == 200, erased.text
            assert erased.json()["postgres"]["batch_jobs"] == 1
            assert erased.json()["postgres"]["messages"] == 1
        refused = await in_flight
        assert refused.status_code == 409, refused.text
        problem = refused.json()
        assert problem["title"] == "User erased"
        assert datetime.fromisoformat(problem["erased_at"]) == datetime.fromisoformat(
            erased.json()["erased_at"]
        )
        assert "after this write began" in problem["detail"]

        async def nothing_in_flight() -> bool:
            return await quiet(db)

        await wait_until(nothing_in_flight, timeout=60)
        assert set((await everything_of(db, user_id)).values()) == {0}
        assert (await client.get(job.headers["location"])).status_code == 404

        # The same writes again, after the erase: each is accepted and written.
        again = await client.post(f"{path}/memories", json={"content": "Ada moved to Porto"})
        assert again.status_code == 201, again.text
        submitted = await client.post(
            f"{path}/messages", json={"messages": [{"content": "I adopted a parrot"}]}
        )
        assert submitted.status_code == 202, submitted.text
        assert (await wait_job(client, user_id, submitted.json()["job_id"]))["state"] == "done"
        requeued = await queued_batch_job(client, user_id, "Ada")

        async def job_done() -> bool:
            response = await client.get(requeued.headers["location"])
            return response.json()["status"] == "done"

        await wait_until(job_done, timeout=120)
    counts = await everything_of(db, user_id)
    # The memory, the batch job's 12 and what the worker made of the message.
    assert counts["memories"] >= 13 and counts["batch_jobs"] == 1, counts


async def _write_until(client, user_id: str, kind: str, stop, log: list) -> None:
    """One writer: a write after another until `stop` is set, each logged with its outcome,
    the moments (monotonic) it was sent and answered, and its body."""
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
        log.append((kind, response.status_code, sent, time.monotonic(), response.json()))


def written_ids(kind: str, body: Any) -> tuple[set[str], set[str]]:
    """The memory ids and message ids an accepted write names."""
    if kind == "memory":
        return {body["id"]}, set()
    if kind == "batch":
        return {m["id"] for m in body["items"]}, set()
    return set(), {m["message_id"] for m in body["submitted"]}


async def assert_only_what_began_after_the_erase(
    db, opensearch, index_name: str, user_id: str, log: list, erase_sent: float, answered: float
) -> None:
    """Once the pipelines settle, after writers (`_write_until`'s log) ran across an erase
    sent at `erase_sent` and answered at `answered` (monotonic): every write acknowledged
    before the erase was sent is gone from both stores, with what the worker made of its
    messages; every write sent after the erase answered was accepted and is there; only writes
    in flight during the erase were refused (409 `User erased`); and the user has nothing else
    (Postgres and OpenSearch alike)."""
    assert not [entry for entry in log if entry[1] >= 500], log[:3]
    accepted = [entry for entry in log if entry[1] in (200, 201, 202)]
    before = [entry for entry in accepted if entry[3] <= erase_sent]
    after = [entry for entry in log if entry[2] > answered]
    assert before and after
    # No window: every write sent after the erase answered is accepted.
    assert {status for _, status, _, _, _ in after} <= {200, 201, 202}, after[:5]
    refused = [entry for entry in log if entry[1] == 409]
    assert all(sent <= answered for _, _, sent, _, _ in refused), refused[:3]
    assert all(body["title"] == "User erased" for *_, body in refused), refused[:3]

    async def settled():
        async with db.connect() as connection:
            open_tasks = await connection.scalar(
                text(
                    "SELECT count(*) FROM ingest_tasks WHERE user_id = :u AND finished_at IS NULL"
                ),
                {"u": user_id},
            )
            pending = await connection.scalar(
                text("SELECT count(*) FROM outbox WHERE user_id = :u AND processed_at IS NULL"),
                {"u": user_id},
            )
        return open_tasks == 0 and pending == 0 and await quiet(db)

    await wait_until(settled, timeout=240)
    async with db.connect() as connection:
        rows = (
            await connection.execute(
                text("SELECT id, chain_id, source_message_id FROM memories WHERE user_id = :u"),
                {"u": user_id},
            )
        ).all()
        messages = set(
            (
                await connection.scalars(
                    text("SELECT CAST(id AS text) FROM messages WHERE user_id = :u"),
                    {"u": user_id},
                )
            ).all()
        )
        failed = await connection.scalar(
            text("SELECT count(*) FROM ingest_tasks WHERE user_id = :u AND state = 'failed'"),
            {"u": user_id},
        )
    assert failed == 0  # every message sent after the erase was ingested

    def ids_of(entries: list) -> tuple[set[str], set[str]]:
        memories: set[str] = set()
        sent_messages: set[str] = set()
        for kind, _, _, _, body in entries:
            made, submitted = written_ids(kind, body)
            memories |= made
            sent_messages |= submitted
        return memories, sent_messages

    chains = {str(row.chain_id) for row in rows}
    sources = {str(row.source_message_id) for row in rows if row.source_message_id is not None}
    gone_memories, gone_messages = ids_of(before)
    kept_memories, kept_messages = ids_of([e for e in accepted if e[2] > answered])
    later_memories, later_messages = ids_of([e for e in accepted if e[3] > erase_sent])
    assert not chains & gone_memories and not (messages | sources) & gone_messages
    assert kept_memories <= chains and kept_messages <= messages
    # Every version left is one of the later writes' memories, or made by the worker from one
    # of their messages.
    assert all(
        str(row.chain_id) in later_memories or str(row.source_message_id) in later_messages
        for row in rows
    ), rows
    assert messages <= later_messages
    # OpenSearch holds exactly the versions Postgres has.
    await opensearch.indices.refresh(index=index_name)
    found = await opensearch.search(
        index=index_name,
        body={"query": {"term": {"user_id": user_id}}, "size": 10000, "_source": False},
    )
    assert {hit["_id"] for hit in found["hits"]["hits"]} == {str(row.id) for row in rows}


async def test_erase_under_concurrent_writes_keeps_only_what_began_after_it(
    client, db, opensearch, index_name, user_id
) -> None:
    """Writers (API memories, batches, messages that the ingestion worker turns into memories)
    run while the user is erased. Once the pipelines settle, every write acknowledged before
    the erase was sent is gone from both stores, every write sent after its response was
    accepted and is there, and the user has nothing else: the writes in flight during the
    erase were refused (409) or, begun after it, kept."""
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
        erase_sent = time.monotonic()
        erase = await client.delete(f"/v1/users/{user_id}")
        erase_answered = time.monotonic()

        async def every_writer_answered_after_the_erase():  # they keep going after it answered
            kinds = [kind for kind, _, sent, _, _ in log if sent > erase_answered]
            return set(kinds) == {"memory", "batch", "message"} and len(kinds) >= len(writers)

        await wait_until(every_writer_answered_after_the_erase, timeout=120)
    finally:
        stop.set()
        await asyncio.gather(*writers)
    assert erase.status_code == 200, erase.text
    await assert_only_what_began_after_the_erase(
        db, opensearch, index_name, user_id, log, erase_sent, erase_answered
    )
    receipt = erase.json()
    assert receipt["writes_refused_until"] is None
    assert "refused" in receipt["guarantee"]
