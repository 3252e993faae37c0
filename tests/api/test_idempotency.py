"""Idempotency-Key on every write route, over real HTTP: a retry replays the first response and
writes nothing; the key on another request is a 422; racing duplicates write once; keys are per
user; stored responses expire and are purged."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession

from app.db.retention import POLICIES, purge_batch
from app.db.tenant import DEFAULT_TENANT_ID
from tests.conftest import InProcessApi, wait_until
from tests.factories import blocked_by, create_memory, hold_user_lock

KEY = "Idempotency-Key"
REPLAYED = "Idempotency-Replayed"
# What one write of each kind adds to writes(): outbox events, or messages.
WRITES = {"create": 1, "batch": 2, "update": 2, "delete": 1, "messages": 1}
KINDS = tuple(WRITES)
WRITE_ROUTES = {
    ("/v1/users/{user_id}/memories", "post"),
    ("/v1/users/{user_id}/memories", "delete"),
    ("/v1/users/{user_id}/memories/batch", "post"),
    ("/v1/users/{user_id}/memories/{memory_id}", "patch"),
    ("/v1/users/{user_id}/memories/{memory_id}", "delete"),
    ("/v1/users/{user_id}/messages", "post"),
}


def new_key() -> dict[str, str]:
    return {KEY: f"test-{uuid.uuid4()}"}


async def prepare(client: httpx.AsyncClient, user_id: str, kind: str) -> tuple[str, str, dict]:
    """The method, path and body of one write of this kind (PATCH/DELETE: of a new memory)."""
    user = f"/v1/users/{user_id}"
    if kind == "create":
        return "POST", f"{user}/memories", {"content": "Ama keeps three goats."}
    if kind == "batch":
        memories = [{"content": "Ama rows at dawn."}, {"content": "Ama reads Le Guin."}]
        return "POST", f"{user}/memories/batch", {"memories": memories}
    if kind == "messages":
        return "POST", f"{user}/messages", {"messages": [{"content": "I started the oud."}]}
    memory = await create_memory(client, user_id, "Ama lives in Accra.")
    path = f"{user}/memories/{memory['id']}"
    if kind == "update":
        return "PATCH", path, {"content": "Ama lives in Kumasi."}
    return "DELETE", path, {}


async def count(db: AsyncEngine, table: str, user_id: str) -> int:
    async with db.connect() as connection:
        return int(
            await connection.scalar(
                text(f"SELECT count(*) FROM {table} WHERE user_id = :u"),  # noqa: S608
                {"u": user_id},
            )
        )


async def writes(db: AsyncEngine, user_id: str, kind: str) -> int:
    """What each write of the kind adds: messages (the job's own memories come later), or
    outbox events (every memory write enqueues at least one, a delete included)."""
    return await count(db, "messages" if kind == "messages" else "outbox", user_id)


def send(client: httpx.AsyncClient, method: str, path: str, body: dict, headers: dict):
    return client.request(method, path, json=body or None, headers=headers)


@pytest.mark.parametrize("kind", KINDS)
async def test_a_retry_replays_the_first_response_and_writes_once(
    client: httpx.AsyncClient, db: AsyncEngine, user_id: str, kind: str
) -> None:
    method, path, body = await prepare(client, user_id, kind)
    before = await writes(db, user_id, kind)
    headers = new_key()
    first = await send(client, method, path, body, headers)
    assert first.status_code in (200, 201, 202), first.text
    assert REPLAYED not in first.headers
    done = await writes(db, user_id, kind)
    assert done > before

    retry = await send(client, method, path, body, headers)
    assert (retry.status_code, retry.content) == (first.status_code, first.content)
    assert retry.headers[REPLAYED] == "true"
    assert retry.headers["content-type"].startswith("application/json")
    assert await writes(db, user_id, kind) == done


async def test_the_key_on_another_request_is_refused(
    client: httpx.AsyncClient, db: AsyncEngine, user_id: str
) -> None:
    headers = new_key()
    path = f"/v1/users/{user_id}/memories"
    first = await client.post(path, json={"content": "Ama keeps bees."}, headers=headers)
    assert first.status_code == 201, first.text

    other = await client.post(path, json={"content": "Ama keeps wasps."}, headers=headers)
    assert other.status_code == 422
    assert other.headers["content-type"].startswith("application/problem+json")
    problem = other.json()
    assert problem["code"] == "idempotency_key_reused" and problem["field"] == KEY
    assert "new key" in problem["detail"]
    elsewhere = await client.delete(f"{path}/{first.json()['id']}", headers=headers)
    assert elsewhere.status_code == 422
    assert await count(db, "memories", user_id) == 1

    # The same JSON, spaced and ordered differently: the same request, replayed.
    respaced = await client.post(
        path,
        content=b'{ "content" :  "Ama keeps bees." }',
        headers={**headers, "Content-Type": "application/json"},
    )
    assert respaced.headers[REPLAYED] == "true" and respaced.content == first.content


@contextlib.asynccontextmanager
async def writes_held(db: AsyncEngine, user_id: str) -> AsyncIterator[AsyncConnection]:
    """Hold the user's write lock as an erase does (app/memories/user_lock.py): writes of the
    user stop just before their first row, after their key check and embedding."""
    async with db.connect() as connection:
        await hold_user_lock(connection, DEFAULT_TENANT_ID, user_id)
        yield connection
        await connection.rollback()


@pytest.mark.parametrize("kind", KINDS)
async def test_racing_duplicates_write_once(
    client: httpx.AsyncClient, db: AsyncEngine, user_id: str, kind: str
) -> None:
    """Both requests pass the key check before either has written (the lock holds them just
    before their writes); released together, one writes and the other answers its response."""
    method, path, body = await prepare(client, user_id, kind)
    before = await writes(db, user_id, kind)
    headers = new_key()
    async with writes_held(db, user_id) as holder:
        racing = [asyncio.create_task(send(client, method, path, body, headers)) for _ in "ab"]

        async def both_waiting() -> bool:
            return await blocked_by(holder) >= 2

        await wait_until(both_waiting, timeout=60, interval=0.05)
    first, second = sorted(
        await asyncio.gather(*racing), key=lambda r: (r.status_code == 409, REPLAYED in r.headers)
    )
    assert first.status_code in (200, 201, 202), first.text
    assert REPLAYED not in first.headers
    assert await writes(db, user_id, kind) == before + WRITES[kind]
    if second.status_code == 409:  # a submission still answering: the retry is told to wait
        assert kind == "messages"
        assert second.json()["code"] == "idempotency_key_in_use"
        assert int(second.headers["Retry-After"]) >= 1
    else:
        assert second.headers[REPLAYED] == "true"
        assert (second.status_code, second.content) == (first.status_code, first.content)


async def test_the_same_key_of_another_user_is_another_key(
    client: httpx.AsyncClient, db: AsyncEngine, user_id: str, other_user_id: str
) -> None:
    headers = new_key()
    body = {"content": "Ama keeps three goats."}
    mine = await client.post(f"/v1/users/{user_id}/memories", json=body, headers=headers)
    theirs = await client.post(f"/v1/users/{other_user_id}/memories", json=body, headers=headers)
    assert (mine.status_code, theirs.status_code) == (201, 201)
    assert REPLAYED not in theirs.headers
    assert theirs.json()["user_id"] == other_user_id and theirs.json()["id"] != mine.json()["id"]
    assert await count(db, "memories", user_id) == 1
    assert await count(db, "memories", other_user_id) == 1


async def expire(db: AsyncEngine, user_id: str) -> None:
    async with db.begin() as connection:
        await connection.execute(
            text(
                "UPDATE idempotency_keys SET expires_at = now() - interval '1 second' "
                "WHERE user_id = :u"
            ),
            {"u": user_id},
        )


async def test_an_expired_key_is_a_new_request_and_is_purged(
    client: httpx.AsyncClient, inprocess_api: InProcessApi, db: AsyncEngine, user_id: str
) -> None:
    headers = new_key()
    path = f"/v1/users/{user_id}/memories"
    body = {"content": "Ama keeps three goats."}
    first = await client.post(path, json=body, headers=headers)
    await expire(db, user_id)

    later = await client.post(path, json=body, headers=headers)
    assert later.status_code == 201 and REPLAYED not in later.headers
    assert later.json()["id"] != first.json()["id"]
    again = await client.post(path, json=body, headers=headers)  # the key now holds `later`
    assert again.headers[REPLAYED] == "true" and again.json()["id"] == later.json()["id"]
    assert await count(db, "memories", user_id) == 2

    await expire(db, user_id)
    # The retention job's batch for the table (app/db/retention.py), as it runs it.
    (keys,) = [policy for policy in POLICIES if policy.table == "idempotency_keys"]
    async with AsyncSession(db) as session, session.begin():
        assert (
            await purge_batch(
                session, keys, inprocess_api.app.state.runtime.settings.retention, 1000
            )
            >= 1
        )
    assert await count(db, "idempotency_keys", user_id) == 0


@pytest.mark.parametrize("key", ["k" * 257, "two words", ""])
async def test_a_malformed_key_is_a_400_and_writes_nothing(
    client: httpx.AsyncClient, db: AsyncEngine, user_id: str, key: str
) -> None:
    response = await client.post(
        f"/v1/users/{user_id}/memories", json={"content": "Ama keeps bees."}, headers={KEY: key}
    )
    assert response.status_code == 400
    problem = response.json()
    assert problem["field"] == KEY and "1 to 256 visible ASCII characters" in problem["detail"]
    assert await count(db, "memories", user_id) == 0


async def test_a_submission_still_answering_gets_409_and_a_lost_one_is_answered_from_its_job(
    client: httpx.AsyncClient, db: AsyncEngine, user_id: str
) -> None:
    """The key's row as a request that is still waiting for its job leaves it (`running`), and
    as one whose process died before answering (`running` long after any wait)."""
    headers = new_key()
    path = f"/v1/users/{user_id}/messages"
    body = {"messages": [{"content": "I started the oud."}]}
    first = await client.post(path, json=body, headers=headers)
    assert first.status_code == 202, first.text

    async def set_running(age: timedelta) -> None:
        async with db.begin() as connection:
            await connection.execute(
                text(
                    "UPDATE idempotency_keys SET state = 'running', response_status = NULL, "
                    "response_body = NULL, created_at = now() - CAST(:age AS interval) "
                    "WHERE user_id = :u"
                ),
                {"u": user_id, "age": age},
            )

    await set_running(timedelta(0))
    busy = await client.post(path, json=body, headers=headers)
    assert busy.status_code == 409 and busy.json()["code"] == "idempotency_key_in_use"
    assert "Retry with the same key" in busy.json()["detail"]
    assert 1 <= int(busy.headers["Retry-After"]) <= 5

    await set_running(timedelta(hours=1))
    recovered = await client.post(path, json=body, headers=headers)
    assert recovered.status_code in (200, 202), recovered.text
    assert recovered.json()["job_id"] == first.json()["job_id"]
    assert await count(db, "messages", user_id) == 1
    replayed = await client.post(path, json=body, headers=headers)
    assert replayed.headers[REPLAYED] == "true" and replayed.content == recovered.content


async def test_an_erase_removes_the_users_stored_responses(
    client: httpx.AsyncClient, db: AsyncEngine, user_id: str
) -> None:
    created = await client.post(
        f"/v1/users/{user_id}/memories", json={"content": "Ama keeps bees."}, headers=new_key()
    )
    assert created.status_code == 201
    assert await count(db, "idempotency_keys", user_id) == 1
    erased = await client.delete(f"/v1/users/{user_id}")
    assert erased.status_code == 200, erased.text
    assert erased.json()["postgres"]["idempotency_keys"] == 1
    assert await count(db, "idempotency_keys", user_id) == 0


async def test_the_header_is_documented_on_every_write_route(client: httpx.AsyncClient) -> None:
    schema = (await client.get("/schema/openapi.json")).json()
    keyed = set()
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            names = {(p["name"], p["in"]) for p in operation.get("parameters", [])}
            if (KEY, "header") in names:
                keyed.add((path, method))
                assert "422" in operation["responses"], (path, method)
                assert REPLAYED in str(operation["responses"]), (path, method)
    assert keyed == WRITE_ROUTES
