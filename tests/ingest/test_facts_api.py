"""A memory is a fact: a user message becomes one memory per fact it states, each as said,
through POST /messages (the real API, Postgres and OpenSearch, the fact model over real
vectors)."""

from __future__ import annotations

import httpx

from tests.ingest.helpers import current_memories, decisions, ingest, message


async def history(client: httpx.AsyncClient, user_id: str, memory_id: str) -> list[dict]:
    response = await client.get(f"/v1/users/{user_id}/memories/{memory_id}/history")
    assert response.status_code == 200, response.text
    return response.json()["versions"]


async def test_a_turn_of_several_facts_becomes_one_memory_per_fact_and_one_of_them_is_updated(
    client: httpx.AsyncClient, user_id: str
) -> None:
    first = await ingest(
        client,
        user_id,
        message("Hi, I'm Priya. I live in Boston.", timestamp="2026-10-20T09:00:00-04:00"),
    )
    stored = {d["content"]: d for d in decisions(first) if d["operation"] == "ADD"}
    assert set(stored) == {"Hi, I'm Priya.", "I live in Boston."}
    (message_id,) = {m["message_id"] for m in first["messages"]}
    memories = {m["content"]: m for m in await current_memories(client, user_id)}
    assert {m["source_message_id"] for m in memories.values()} == {message_id}
    # Each fact keeps the turn it was said in as its context.
    assert "Hi, I'm Priya. I live in Boston." in memories["I live in Boston."]["context"]

    moved = decisions(
        await ingest(
            client,
            user_id,
            message("I moved to Seattle last month.", timestamp="2026-12-07T10:00:00-08:00"),
        )
    )
    (update,) = moved
    assert update["operation"] == "UPDATE"
    assert update["target_memory_id"] == stored["I live in Boston."]["memory_id"]
    versions = await history(client, user_id, update["memory_id"])
    assert [v["content"] for v in versions] == [
        "I live in Boston.",
        "I moved to Seattle last month.",
    ]
    current = sorted(m["content"] for m in await current_memories(client, user_id))
    assert current == ["Hi, I'm Priya.", "I moved to Seattle last month."]


async def test_requests_greetings_and_thanks_stay_in_the_message(
    client: httpx.AsyncClient, user_id: str
) -> None:
    turn = "Could you recommend a running app? We just moved to Valencia, so I need new routes."
    job = await ingest(client, user_id, message(turn))
    by_content = {d["content"]: d for d in decisions(job)}
    assert by_content["Could you recommend a running app?"]["operation"] == "NONE"
    assert by_content["Could you recommend a running app?"]["reason"].startswith(
        "not a fact: score"
    )
    kept = "We just moved to Valencia, so I need new routes."
    assert by_content[kept]["operation"] == "ADD"
    (memory,) = await current_memories(client, user_id)
    assert memory["content"] == kept and turn in memory["context"]

    thanks = decisions(await ingest(client, user_id, message("Thanks so much, that's helpful!")))
    assert [d["operation"] for d in thanks] == ["NONE"]
    assert [m["content"] for m in await current_memories(client, user_id)] == [kept]
    # The message itself is kept whole in its job, fact or not.
    assert (await client.get(f"/v1/users/{user_id}/jobs/{job['job_id']}")).status_code == 200


async def test_a_correction_is_stored_as_the_user_said_it(
    client: httpx.AsyncClient, user_id: str
) -> None:
    (seat,) = decisions(await ingest(client, user_id, message("I prefer window seats on flights.")))
    said = "Actually, I prefer aisle seats now, my knee hurts."
    (update,) = decisions(await ingest(client, user_id, message(said)))
    assert update["operation"] == "UPDATE" and update["target_memory_id"] == seat["memory_id"]
    assert update["content"] == said
    versions = await history(client, user_id, update["memory_id"])
    assert [v["content"] for v in versions] == ["I prefer window seats on flights.", said]


async def test_post_memories_keeps_exactly_what_it_is_given(
    client: httpx.AsyncClient, user_id: str
) -> None:
    content = "Hi, I'm Priya. Could you remember that I live in Boston?"
    response = await client.post(f"/v1/users/{user_id}/memories", json={"content": content})
    assert response.status_code == 201, response.text
    assert [m["content"] for m in await current_memories(client, user_id)] == [content]
