"""Expiry: `expires_at` / `ttl_s` through every door, an expired memory hidden by every read at
once (both search legs, list, get, history) before any reaper runs, and the reaper removing it
from both stores, audited like an erase, without touching anyone else's memories."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import text

from app.db.tenant import DEFAULT_TENANT_ID, tenant_scope
from app.memories.expiry_reaper import ExpiryReaper, Reaped
from tests.conftest import InProcessApi, wait_until
from tests.factories import (
    create_memory,
    hold_user_lock,
    indexed_document,
    search,
    stage_rank,
)
from tests.imports.helpers import NDJSON, jsonl


def _at(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def _later(**delta: float) -> str:
    return (datetime.now(UTC) + timedelta(**delta)).isoformat()


async def _expire_now(db, chain_id: str) -> None:
    """Let a memory's time run out: its expiry moved to the past in the database, as time
    passing would, without waiting (the OpenSearch documents keep their old expiry)."""
    async with db.begin() as connection:
        updated = await connection.execute(
            text(
                "UPDATE memories SET expires_at = now() - interval '1 second' "
                "WHERE chain_id = CAST(:c AS uuid)"
            ),
            {"c": chain_id},
        )
        assert updated.rowcount >= 1


async def _rows(db, sql: str, **params) -> list:
    async with db.connect() as connection:
        return list((await connection.execute(text(sql), params)).all())


async def _reap_until(runtime, predicate) -> None:
    """Run the reaper (as the relay's process would) until `predicate` holds."""

    async def reaped():
        await runtime.reaper.reap_due()
        return await predicate()

    await wait_until(reaped, timeout=30)


# --- the doors ---------------------------------------------------------------------------------


async def test_expiry_is_set_by_every_door(client, user_id) -> None:
    when = _later(days=3)
    made = await create_memory(client, user_id, "Door one: a set expiry", expires_at=when)
    assert _at(made["expires_at"]) == _at(when)

    before = datetime.now(UTC)
    ttl = await create_memory(client, user_id, "Door two: a time to live", ttl_s=3600)
    after = datetime.now(UTC)
    assert before + timedelta(hours=1) <= _at(ttl["expires_at"]) <= after + timedelta(hours=1)

    batch = await client.post(
        f"/v1/users/{user_id}/memories/batch",
        json={
            "memories": [
                {"content": "Door three: no expiry"},
                {"content": "Door three: a batch expiry", "ttl_s": 60},
            ]
        },
    )
    assert batch.status_code == 201, batch.text
    items = batch.json()["items"]
    assert items[0]["expires_at"] is None
    assert _at(items[1]["expires_at"]) > datetime.now(UTC)

    imported = await client.post(
        f"/v1/users/{user_id}/import",
        content=jsonl(
            [
                {"external_id": "x-1", "content": "Door four: imported", "expires_at": when},
                {"external_id": "x-2", "content": "Door four: imported ttl", "ttl_s": 120},
            ]
        ),
        headers=NDJSON,
    )
    assert imported.status_code == 200, imported.text
    assert imported.json()["imported"] == 2, imported.text
    listed = (await client.get(f"/v1/users/{user_id}/memories")).json()["items"]
    by_content = {m["content"]: m for m in listed}
    assert _at(by_content["Door four: imported"]["expires_at"]) == _at(when)
    assert _at(by_content["Door four: imported ttl"]["expires_at"]) > datetime.now(UTC)


async def test_patch_sets_changes_and_clears_the_expiry_of_every_version(client, user_id) -> None:
    first = await create_memory(client, user_id, "I rent a flat on Elm Street")
    path = f"/v1/users/{user_id}/memories"
    second = (
        await client.patch(f"{path}/{first['id']}", json={"content": "I rent a flat on Oak Street"})
    ).json()
    assert second["expires_at"] is None

    when = _later(days=10)
    third = await client.patch(f"{path}/{second['id']}", json={"expires_at": when})
    assert third.status_code == 200, third.text
    history = (await client.get(f"{path}/{first['id']}/history")).json()["versions"]
    assert len(history) == 3
    assert {_at(v["expires_at"]) for v in history} == {_at(when)}  # the memory, not a version

    fourth = await client.patch(f"{path}/{third.json()['id']}", json={"ttl_s": 7200})
    assert fourth.status_code == 200, fourth.text
    moved = _at(fourth.json()["expires_at"])
    assert moved < _at(when)
    # Omitted: kept, also when the content changes.
    fifth = await client.patch(f"{path}/{fourth.json()['id']}", json={"content": "I own it now"})
    assert _at(fifth.json()["expires_at"]) == moved

    cleared = await client.patch(f"{path}/{fifth.json()['id']}", json={"expires_at": None})
    assert cleared.status_code == 200, cleared.text
    history = (await client.get(f"{path}/{first['id']}/history")).json()["versions"]
    assert [v["expires_at"] for v in history] == [None] * 6


BAD_EXPIRIES = [
    ({"expires_at": "2001-01-01T00:00:00Z"}, "expires_at", "not in the future"),
    ({"expires_at": "next tuesday"}, "expires_at", "expires_at"),
    ({"ttl_s": 0}, "ttl_s", "ttl_s"),
    ({"ttl_s": -5}, "ttl_s", "ttl_s"),
    ({"ttl_s": 60, "expires_at": "2099-01-01T00:00:00Z"}, "ttl_s", "not both"),
    ({"expires_at": "9999-01-01T00:00:00Z"}, "expires_at", "out of range"),
]


@pytest.mark.parametrize(("fields", "field", "message"), BAD_EXPIRIES)
async def test_a_bad_expiry_is_a_400_naming_the_field(
    client, db, user_id, fields, field, message
) -> None:
    path = f"/v1/users/{user_id}/memories"
    created = await client.post(path, json={"content": "Never stored", **fields})
    batch = await client.post(
        f"{path}/batch", json={"memories": [{"content": "fine"}, {"content": "no", **fields}]}
    )
    keep = await create_memory(client, user_id, "Kept as it was")
    patched = await client.patch(f"{path}/{keep['id']}", json=fields)
    for response, named in ((created, field), (batch, f"memories[1].{field}"), (patched, field)):
        assert response.status_code == 400, response.text
        assert response.headers["content-type"].startswith("application/problem+json")
        problem = response.json()
        assert problem.get("field") == named or named in problem["detail"], problem
        assert message in problem["detail"] or message in str(problem.get("errors")), problem
    rows = await _rows(db, "SELECT content, expires_at FROM memories WHERE user_id = :u", u=user_id)
    assert rows == [("Kept as it was", None)]


async def test_an_import_line_with_a_past_expiry_fails_alone(client, user_id) -> None:
    response = await client.post(
        f"/v1/users/{user_id}/import",
        content=jsonl(
            [
                {"external_id": "a", "content": "Fine line"},
                {"external_id": "b", "content": "Late", "expires_at": "2001-01-01T00:00:00Z"},
            ]
        ),
        headers=NDJSON,
    )
    assert response.status_code == 200, response.text
    summary = response.json()
    assert summary["imported"] == 1
    assert [(e["line"], e["field"]) for e in summary["errors"]] == [(2, "expires_at")]


async def test_the_idempotency_fingerprint_includes_the_expiry(client, user_id) -> None:
    path = f"/v1/users/{user_id}/memories"
    key = {"Idempotency-Key": f"exp-{uuid.uuid4().hex}"}
    body = {"content": "A keyed memory", "ttl_s": 600}
    first = await client.post(path, json=body, headers=key)
    assert first.status_code == 201, first.text
    replay = await client.post(path, json=body, headers=key)
    assert replay.json() == first.json()
    other = await client.post(path, json={**body, "ttl_s": 601}, headers=key)
    assert other.status_code == 422, other.text
    assert other.json()["code"] == "idempotency_key_reused"


# --- hidden at once ------------------------------------------------------------------------------


async def test_an_expired_memory_disappears_from_every_read_before_any_reaper(
    inprocess_api: InProcessApi, client, db, opensearch, index_name, user_id
) -> None:
    word = f"zx{uuid.uuid4().hex[:8]}"
    going = await create_memory(client, user_id, f"My locker word is {word} for now")
    staying = await create_memory(client, user_id, f"My bike lock word is {word} forever")
    path = f"/v1/users/{user_id}/memories"
    updated = await client.patch(f"{path}/{going['id']}", json={"content": f"Locker: {word}"})
    going = updated.json()
    found = await search(client, user_id, word, consistency="indexed", top_k=10)
    ids = {r["memory"]["id"] for r in found["results"]}
    assert {going["id"], staying["id"]} <= ids  # both legs see both before

    await _expire_now(db, going["chain_id"])

    for query in (word, "which word opens my locker"):  # the BM25 and the vector leg
        found = await search(client, user_id, query, top_k=10)
        ids = {r["memory"]["id"] for r in found["results"]}
        assert going["id"] not in ids and going["chain_id"] not in ids, query
        assert staying["id"] in ids, query
    hit = next(r for r in found["results"] if r["memory"]["id"] == staying["id"])
    assert stage_rank(hit, "256d") is not None  # the vector leg found it
    for params in ({}, {"include_superseded": "true"}):
        listed = (await client.get(path, params=params)).json()["items"]
        assert going["chain_id"] not in {m["chain_id"] for m in listed}
        assert staying["id"] in {m["id"] for m in listed}
    for response in (
        await client.get(f"{path}/{going['id']}"),
        await client.get(f"{path}/{going['chain_id']}/history"),
        await client.patch(f"{path}/{going['id']}", json={"content": "back"}),
        await client.delete(f"{path}/{going['id']}"),
    ):
        assert response.status_code == 404, response.text

    # The tenant's users list counts it no more: one current memory, one version left.
    users = (await client.get("/v1/users", params={"prefix": user_id})).json()["items"]
    assert [(u["user_id"], u["memories"], u["versions"]) for u in users] == [(user_id, 1, 1)]
    # Hidden, not gone: no reaper has run (COGNIS_EXPIRY_REAP_INTERVAL_S=0 in the tests).
    rows = await _rows(
        db, "SELECT count(*) FROM memories WHERE chain_id = CAST(:c AS uuid)", c=going["chain_id"]
    )
    assert rows == [(2,)]
    assert await indexed_document(opensearch, index_name, going["id"]) is not None


async def test_a_near_expiry_drops_out_of_the_bm25_leg_itself(
    inprocess_api: InProcessApi, client, user_id
) -> None:
    """The index's documents carry expires_at: OpenSearch leaves the memory out of its top k
    once the time has come, without Postgres' re-check."""
    word = f"zq{uuid.uuid4().hex[:8]}"
    brief = await create_memory(client, user_id, f"The door code is {word}", ttl_s=20)
    await create_memory(client, user_id, f"The gate code is {word}")
    found = await search(client, user_id, word, consistency="indexed")
    assert brief["id"] in {r["memory"]["id"] for r in found["results"]}
    index = inprocess_api.app.state.runtime.index

    async def bm25_ids() -> set[str]:
        with tenant_scope(DEFAULT_TENANT_ID):
            hits = await index.search_bm25(user_id, word, 10)
        return {str(h.memory_id) for h in hits}

    assert brief["id"] in await bm25_ids()

    async def dropped():
        ids = await bm25_ids()
        return brief["id"] not in ids and len(ids) == 1

    await wait_until(dropped, timeout=60)
    found = await search(client, user_id, word)
    assert brief["id"] not in {r["memory"]["id"] for r in found["results"]}


# --- the reaper ---------------------------------------------------------------------------------


async def test_the_reaper_removes_expired_memories_from_both_stores_with_an_audit_row(
    inprocess_api: InProcessApi, client, db, opensearch, index_name, user_id, other_user_id
) -> None:
    runtime = inprocess_api.app.state.runtime
    going = await create_memory(client, user_id, "A passing note about parking", ttl_s=3600)
    path = f"/v1/users/{user_id}/memories"
    second = (
        await client.patch(f"{path}/{going['id']}", json={"content": "Parking: bay 4"})
    ).json()
    staying = await create_memory(client, user_id, "A note that stays", ttl_s=3600)
    neighbour = await create_memory(client, other_user_id, "Someone else's note", ttl_s=3600)
    await search(client, user_id, "parking", consistency="indexed")
    for memory_id in (going["id"], second["version_id"], staying["id"], neighbour["id"]):
        assert await indexed_document(opensearch, index_name, memory_id) is not None

    await _expire_now(db, going["chain_id"])
    sql_audit = "SELECT user_id, versions, expires_at FROM memory_expiries WHERE chain_id = :c"

    async def audited():
        return await _rows(db, sql_audit.replace(":c", "CAST(:c AS uuid)"), c=going["chain_id"])

    await _reap_until(runtime, audited)
    (row,) = await audited()
    assert row[0] == user_id and row[1] == 2 and row[2] < datetime.now(UTC)
    gone = await _rows(
        db, "SELECT id FROM memories WHERE chain_id = CAST(:c AS uuid)", c=going["chain_id"]
    )
    assert gone == []
    events = await _rows(
        db,
        "SELECT memory_id::text, op FROM outbox WHERE user_id = :u AND op = 'delete_document'",
        u=user_id,
    )
    assert sorted(events) == sorted(
        [(going["id"], "delete_document"), (second["version_id"], "delete_document")]
    )

    async def documents_gone():
        found = [
            await indexed_document(opensearch, index_name, i)
            for i in (going["id"], second["version_id"])
        ]
        return found == [None, None]

    await wait_until(documents_gone)
    # Everyone else's memories are untouched, in both stores.
    for memory_id in (staying["id"], neighbour["id"]):
        assert await indexed_document(opensearch, index_name, memory_id) is not None
    kept = await _rows(
        db,
        "SELECT count(*) FROM memories WHERE id IN (CAST(:a AS uuid), CAST(:b AS uuid))",
        a=staying["id"],
        b=neighbour["id"],
    )
    assert kept == [(2,)]
    # Erasing the user takes the audit rows too: an erase leaves nothing of the user.
    erased = await client.delete(f"/v1/users/{user_id}")
    assert erased.status_code == 200, erased.text
    assert erased.json()["postgres"]["memory_expiries"] == 1
    assert await audited() == []


async def test_the_reaper_skips_a_user_whose_write_is_in_flight(
    inprocess_api: InProcessApi, client, db, user_id
) -> None:
    """Low-lock: a user whose write holds the user's lock is left for the next batch, never
    waited for; the write's own transaction is not blocked by the reaper either."""
    runtime = inprocess_api.app.state.runtime
    going = await create_memory(client, user_id, "Expiring while a write runs", ttl_s=3600)
    await _expire_now(db, going["chain_id"])
    async with db.connect() as writer:
        await hold_user_lock(writer, DEFAULT_TENANT_ID, user_id, "KEY SHARE")
        reaped = await asyncio.wait_for(runtime.reaper.reap_due(), timeout=10)
        assert reaped.users_busy >= 1
        still = await _rows(
            db, "SELECT count(*) FROM memories WHERE id = CAST(:i AS uuid)", i=going["id"]
        )
        assert still == [(1,)]
        await writer.rollback()
    reaped = await runtime.reaper.reap_due()
    assert reaped.memories >= 1
    gone = await _rows(
        db, "SELECT count(*) FROM memories WHERE id = CAST(:i AS uuid)", i=going["id"]
    )
    assert gone == [(0,)]


async def test_the_reaper_loop_runs_on_its_interval(
    inprocess_api: InProcessApi, client, db, user_id
) -> None:
    runtime = inprocess_api.app.state.runtime
    settings = runtime.settings.model_copy(
        update={"expiry_reap_interval_s": 0.2, "expiry_reap_batch_size": 1}
    )
    reaper = ExpiryReaper(runtime.background_sessionmaker, settings.relay)
    made = [await create_memory(client, user_id, f"Loop note {i}", ttl_s=3600) for i in range(3)]
    for memory in made:
        await _expire_now(db, memory["chain_id"])
    stop = asyncio.Event()
    task = asyncio.create_task(reaper.run_forever(stop))

    async def all_gone():
        rows = await _rows(db, "SELECT count(*) FROM memories WHERE user_id = :u", u=user_id)
        return rows == [(0,)]

    try:
        await wait_until(all_gone, timeout=30)
    finally:
        stop.set()
        await asyncio.wait_for(task, timeout=10)
    audit = await _rows(db, "SELECT count(*) FROM memory_expiries WHERE user_id = :u", u=user_id)
    assert audit == [(3,)]
    assert Reaped(1, 2, 0) + Reaped(2, 3, 1, more=True) == Reaped(3, 5, 1, more=True)
