"""Bad input gets a 4xx problem+json with an actionable message, and writes nothing."""

from __future__ import annotations

import uuid

import pytest

from tests.factories import create_memory, user_row_counts

BAD_CREATES = [
    ({"content": ""}, 400, "content"),
    ({"content": "   "}, 400, "content must not be empty"),
    ({"content": "x" * 8001}, 400, "length <= 8000"),
    ({"content": "ok", "category": "astrology"}, 400, "unknown category 'astrology'"),
    ({"content": "ok", "scope": "CONTEXT"}, 400, "session_id"),
    ({"content": "ok", "scope": "GLOBAL"}, 400, "scope"),
    ({"content": 42}, 400, "content"),
    ({"content": "ok", "event_time": "yesterday-ish"}, 400, "event_time"),
    ({"content": "ok", "surprise": True}, 400, "surprise"),
    ({}, 400, "content"),
    ({"content": "ok", "metadata": {"blob": "x" * 20_000}}, 400, "metadata is"),
    ({"content": "ok", "metadata": ["not", "an", "object"]}, 400, "metadata"),
]


@pytest.mark.parametrize(("body", "status", "message"), BAD_CREATES)
async def test_bad_create_is_rejected_and_writes_nothing(
    client, db, user_id, body, status, message
) -> None:
    response = await client.post(f"/v1/users/{user_id}/memories", json=body)
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    problem = response.json()
    assert problem["status"] == status
    assert message in problem["detail"] or message in str(problem.get("errors"))
    assert await user_row_counts(db, user_id) == {"memories": 0, "messages": 0, "outbox": 0}


async def test_one_bad_item_rejects_the_whole_batch(client, db, user_id) -> None:
    response = await client.post(
        f"/v1/users/{user_id}/memories/batch",
        json={"memories": [{"content": "fine"}, {"content": "also fine", "category": "nope"}]},
    )
    assert response.status_code == 400
    assert response.json()["field"] == "memories[1].category"
    assert await user_row_counts(db, user_id) == {"memories": 0, "messages": 0, "outbox": 0}


async def test_oversized_batch_is_rejected(client, db, user_id) -> None:
    response = await client.post(
        f"/v1/users/{user_id}/memories/batch",
        json={"memories": [{"content": f"m{i}"} for i in range(101)]},
    )
    assert response.status_code == 400
    assert "length <= 100" in response.json()["detail"]
    assert (await user_row_counts(db, user_id))["memories"] == 0


async def test_malformed_and_unknown_ids(client, user_id) -> None:
    malformed = await client.get(f"/v1/users/{user_id}/memories/not-a-uuid")
    assert malformed.status_code == 400
    assert "not a UUID" in malformed.json()["detail"]
    unknown = await client.get(f"/v1/users/{user_id}/memories/{uuid.uuid4()}")
    assert unknown.status_code == 404
    bad_user = await client.get("/v1/users/bad%20user!/memories")
    assert bad_user.status_code == 400
    assert "user_id" in bad_user.json()["detail"]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"query": "hello", "top_k": 0}, "Expected `int` >= 1 - at `$.top_k`"),
        ({"query": "hello", "top_k": 101}, "Expected `int` <= 100 - at `$.top_k`"),
        ({"query": "hello", "top_k": "ten"}, "top_k"),
        ({"query": ""}, "query"),
        ({"query": "   "}, "query must not be empty"),
    ],
)
async def test_bad_search_is_rejected(client, user_id, body, message) -> None:
    response = await client.post(f"/v1/users/{user_id}/search", json=body)
    assert response.status_code == 400, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    problem = response.json()
    assert message in problem["detail"] or message in str(problem.get("errors"))


async def test_bad_update_leaves_the_chain_alone(client, user_id) -> None:
    memory = await create_memory(client, user_id, "I speak Portuguese")
    for body in ({"content": "  "}, {"category": "nope"}, {"scope": "CONTEXT", "session_id": None}):
        response = await client.patch(f"/v1/users/{user_id}/memories/{memory['id']}", json=body)
        assert response.status_code == 400, response.text
    history = (await client.get(f"/v1/users/{user_id}/memories/{memory['id']}/history")).json()
    assert len(history["versions"]) == 1
    assert history["versions"][0]["is_current"] is True


async def test_bad_cursor_is_rejected(client, user_id) -> None:
    response = await client.get(f"/v1/users/{user_id}/memories", params={"cursor": "garbage"})
    assert response.status_code == 400
    assert "cursor" in response.json()["detail"]


async def test_category_is_chosen_when_omitted(client, user_id) -> None:
    memory = await create_memory(client, user_id, "I am allergic to peanuts and avoid gluten")
    assert memory["category"] in {"dietary", "health"}


@pytest.mark.parametrize(
    ("method", "path", "allowed", "not_allowed"),
    [
        ("PUT", "memories", {"GET", "POST", "DELETE"}, "PUT"),
        ("PUT", "memories/{id}", {"GET", "PATCH", "DELETE"}, "PUT"),
        ("GET", "search", {"POST"}, "GET"),
    ],
)
async def test_a_wrong_method_is_a_405_that_says_which_are_allowed(
    client, db, user_id, method, path, allowed, not_allowed
) -> None:
    """Issue 42, item 7: RFC 9110 requires a 405 to carry Allow; it was dropped on the way to
    problem+json."""
    memory = await create_memory(client, user_id, "I keep bees")
    response = await client.request(
        method, f"/v1/users/{user_id}/{path.format(id=memory['id'])}", json={"content": "x"}
    )
    assert response.status_code == 405, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    listed = {m.strip() for m in response.headers["allow"].split(",")}
    assert allowed <= listed, listed
    assert not_allowed not in listed
    assert await user_row_counts(db, user_id) == {"memories": 1, "messages": 0, "outbox": 1}
