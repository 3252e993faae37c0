"""Ingestion without an LLM (the session's plain API): steps 1, 2 and 4, the deterministic
extractor, idempotency, ordering, jobs, dry runs and recovery of an abandoned job."""

from __future__ import annotations

import uuid

import httpx
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.conftest import InProcessApi
from tests.ingest.helpers import (
    current_memories,
    decisions,
    ingest,
    message,
    rows,
    scalar,
    wait_job,
)


async def test_message_becomes_a_memory_through_a_job(
    client: httpx.AsyncClient, db: AsyncEngine, user_id: str
) -> None:
    response = await client.post(
        f"/v1/users/{user_id}/messages",
        json={
            "messages": [
                message(
                    "I am allergic to peanuts",
                    "2024-03-02T09:30:00Z",
                    speaker="Dana",
                    session_id="s1",
                )
            ]
        },
    )
    assert response.status_code == 202, response.text
    accepted = response.json()
    (submitted,) = accepted["submitted"]
    assert submitted["duplicate"] is False
    # Step 1: the message row is committed when the 202 is sent (the worker embeds it).
    saved_query = (
        "SELECT speaker, session_id, sent_at, vector_dims(embedding_256d) AS dims "
        "FROM messages WHERE id = :id AND user_id = :u"
    )
    saved = await rows(db, saved_query, id=submitted["message_id"], u=user_id)
    assert saved and saved[0]["speaker"] == "Dana" and saved[0]["session_id"] == "s1"

    job = await wait_job(client, user_id, accepted["job_id"])
    assert job["state"] == "done"
    # The worker kept the vector it computed on the message row (a retry reuses it).
    (embedded,) = await rows(db, saved_query, id=submitted["message_id"], u=user_id)
    assert embedded["dims"] == 256
    (decision,) = decisions(job)
    assert decision["operation"] == "ADD"
    assert decision["extractor"] == "deterministic" and decision["fallback_used"] is False
    # Nearest category description: an allergy to a food is about health or diet.
    assert decision["category"] in {"health", "dietary"}
    (memory,) = await current_memories(client, user_id)
    assert memory["id"] == decision["memory_id"]
    assert memory["content"] == "I am allergic to peanuts"
    assert memory["source_message_id"] == submitted["message_id"]
    assert memory["speaker"] == "Dana" and memory["scope"] == "USER"
    # No time expression: the fact dates from when it was said.
    assert memory["event_time"].startswith("2024-03-02T09:30:00")
    assert memory["category"] in ("dietary", "health")


async def test_yesterday_resolves_against_the_message_time(
    client: httpx.AsyncClient, user_id: str
) -> None:
    job = await ingest(
        client, user_id, message("I ran a half marathon yesterday", "2023-05-08T18:00:00Z")
    )
    (decision,) = decisions(job)
    (memory,) = await current_memories(client, user_id)
    assert memory["id"] == decision["memory_id"]
    assert memory["event_time"].startswith("2023-05-07T00:00:00")


async def test_a_repeated_fact_is_none(client: httpx.AsyncClient, user_id: str) -> None:
    first = await ingest(client, user_id, message("My favourite colour is green"))
    second = await ingest(client, user_id, message("My favourite colour is green"))
    (added,) = decisions(first)
    (repeated,) = decisions(second)
    assert repeated["operation"] == "NONE"
    assert repeated["target_memory_id"] == added["memory_id"]
    assert repeated["memory_id"] is None
    assert len(await current_memories(client, user_id)) == 1


async def test_same_idempotency_key_twice_stores_one_message(
    client: httpx.AsyncClient, db: AsyncEngine, user_id: str
) -> None:
    body = message("I play the cello", idempotency_key="turn-42")
    first = await ingest(client, user_id, body)
    second = await ingest(client, user_id, body)
    assert second["submitted"][0]["duplicate"] is True
    assert second["submitted"][0]["message_id"] == first["submitted"][0]["message_id"]
    assert second["job_id"] == first["job_id"]
    assert await scalar(db, "SELECT count(*) FROM messages WHERE user_id = :u", u=user_id) == 1
    assert len(await current_memories(client, user_id)) == 1


async def test_messages_of_one_request_apply_in_timestamp_order(
    client: httpx.AsyncClient, db: AsyncEngine, user_id: str
) -> None:
    # Sent newest first: the store must still see the older one first.
    await ingest(
        client,
        user_id,
        message("I started learning Rust", "2023-06-02T10:00:00Z"),
        message("I started learning Go", "2023-06-01T10:00:00Z"),
    )
    # Both are applied in one transaction (one created_at): the audit rows' identity column
    # gives the order they were decided and written in.
    applied = await rows(
        db,
        "SELECT m.content FROM ingest_decisions d JOIN memories m ON m.id = d.memory_id"
        " WHERE d.user_id = :u AND d.operation = 'ADD' ORDER BY d.id",
        u=user_id,
    )
    assert [r["content"] for r in applied] == ["I started learning Go", "I started learning Rust"]


async def test_assistant_messages_are_not_memories(client: httpx.AsyncClient, user_id: str) -> None:
    job = await ingest(client, user_id, message("How can I help you today?", role="assistant"))
    (decision,) = decisions(job)
    assert decision["operation"] == "NONE"
    assert await current_memories(client, user_id) == []


async def test_context_scope_binds_the_memory_to_the_session(
    client: httpx.AsyncClient, user_id: str
) -> None:
    await ingest(
        client,
        user_id,
        message(
            "I am at the airport waiting for my flight to Lisbon",
            scope="CONTEXT",
            session_id="sess-9",
        ),
    )
    (memory,) = await current_memories(client, user_id)
    assert memory["scope"] == "CONTEXT" and memory["session_id"] == "sess-9"


async def test_dry_run_returns_decisions_and_writes_nothing(
    client: httpx.AsyncClient, db: AsyncEngine, user_id: str
) -> None:
    response = await client.post(
        f"/v1/users/{user_id}/messages",
        params={"dry_run": "true"},
        json={"messages": [message("I work as a nurse", "2023-01-05T08:00:00Z")]},
    )
    assert response.status_code == 200, response.text
    (result,) = response.json()["messages"]
    (decision,) = result["decisions"]
    assert decision["operation"] == "ADD" and decision["memory_id"] is None
    assert decision["event_time"].startswith("2023-01-05T08:00:00")
    assert await scalar(db, "SELECT count(*) FROM messages WHERE user_id = :u", u=user_id) == 0
    assert await current_memories(client, user_id) == []


async def test_jobs_are_only_visible_to_their_user(
    client: httpx.AsyncClient, user_id: str, other_user_id: str
) -> None:
    job = await ingest(client, user_id, message("I have two cats"))
    mine = await client.get(f"/v1/users/{user_id}/jobs/{job['job_id']}")
    theirs = await client.get(f"/v1/users/{other_user_id}/jobs/{job['job_id']}")
    assert mine.status_code == 200
    assert theirs.status_code == 404
    assert theirs.headers["content-type"].startswith("application/problem+json")
    missing = await client.get(f"/v1/users/{user_id}/jobs/{uuid.uuid4()}")
    assert missing.status_code == 404


async def test_invalid_submissions_are_400(client: httpx.AsyncClient, user_id: str) -> None:
    for body in (
        {"messages": []},
        {"messages": [{"content": "   "}]},
        {"messages": [{"content": "hi", "scope": "CONTEXT"}]},
        {"messages": [{"content": "hi", "role": "robot"}]},
        {"messages": [{"content": "hi", "surprise": 1}]},
    ):
        response = await client.post(f"/v1/users/{user_id}/messages", json=body)
        assert response.status_code == 400, (body, response.text)


async def test_an_abandoned_job_is_taken_again_and_completed(
    client: httpx.AsyncClient, inprocess_api: InProcessApi, db: AsyncEngine, user_id: str
) -> None:
    """A worker that died mid-job left its task running with a lapsed lease: another worker
    takes it over, and the message is applied exactly once."""
    message_id, job_id = uuid.uuid4(), uuid.uuid4()
    async with db.begin() as connection:
        await connection.execute(
            text(
                "INSERT INTO messages (id, user_id, role, content, sent_at) "
                "VALUES (:id, :u, 'user', 'I collect vintage stamps', now())"
            ),
            {"id": message_id, "u": user_id},
        )
        await connection.execute(
            text(
                "INSERT INTO ingest_tasks (message_id, job_id, user_id, queue, sent_at, state, "
                "attempts, lease_token, lease_expires_at) VALUES (:m, :j, :u, :q, now(), "
                "'running', 1, :t, now() - interval '1 second')"
            ),
            {
                "m": message_id,
                "j": job_id,
                "u": user_id,
                "t": uuid.uuid4(),
                # The queue the in-process API's worker takes.
                "q": inprocess_api.app.state.runtime.settings.ingest.ingest_queue,
            },
        )
    job = await wait_job(client, user_id, str(job_id))
    assert job["state"] == "done"
    assert job["messages"][0]["attempts"] == 2
    (memory,) = await current_memories(client, user_id)
    assert memory["content"] == "I collect vintage stamps"


async def test_erasing_a_user_removes_messages_jobs_and_decisions(
    client: httpx.AsyncClient, db: AsyncEngine, user_id: str
) -> None:
    await ingest(client, user_id, message("I am learning Japanese"))
    response = await client.delete(f"/v1/users/{user_id}")
    assert response.status_code == 200, response.text
    for table in ("messages", "ingest_tasks", "ingest_decisions", "memories"):
        count = await scalar(db, f"SELECT count(*) FROM {table} WHERE user_id = :u", u=user_id)  # noqa: S608
        assert count == 0, table
