"""Inputs that once gave a 500 (or a poisoned ingestion task): each is now a 400 problem+json
that names the field and says what to change, and writes nothing."""

from __future__ import annotations

import json

import pytest

from tests.factories import user_row_counts

pytestmark = pytest.mark.usefixtures("ingest_worker")  # messages through the in-process API

NUL = "a\x00b"  # sent as the JSON escape \\u0000


def _nested(levels: int) -> str:
    return '{"k":' * levels + "1" + "}" * levels


def _assert_problem(response, field: str | None, words: str) -> dict:
    assert response.status_code == 400, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    problem = response.json()
    assert words in problem["detail"], problem
    if field is not None:
        assert problem.get("field") == field, problem
    return problem


MEMORY_NULS = [
    ({"content": NUL}, "content"),
    ({"content": "ok", "speaker": NUL}, "speaker"),
    ({"content": "ok", "scope": "CONTEXT", "session_id": NUL}, "session_id"),
    ({"content": "ok", "metadata": {NUL: 1}}, "metadata"),
    ({"content": "ok", "metadata": {"k": ["x", {"v": NUL}]}}, "metadata"),
]


@pytest.mark.parametrize(("body", "field"), MEMORY_NULS)
async def test_nul_in_a_memory_is_a_400(client, db, user_id, body, field) -> None:
    response = await client.post(f"/v1/users/{user_id}/memories", json=body)
    _assert_problem(response, field, "NUL character")
    assert await user_row_counts(db, user_id) == {"memories": 0, "messages": 0, "outbox": 0}


MESSAGE_NULS = [
    ({"content": NUL}, "messages[0].content"),
    ({"content": "ok", "speaker": NUL}, "messages[0].speaker"),
    ({"content": "ok", "session_id": NUL}, "messages[0].session_id"),
    ({"content": "ok", "metadata": {"k": NUL}}, "messages[0].metadata"),
    ({"content": "ok", "idempotency_key": NUL}, "messages[0].idempotency_key"),
]


@pytest.mark.parametrize(("message", "field"), MESSAGE_NULS)
async def test_nul_in_a_message_is_a_400(client, db, user_id, message, field) -> None:
    response = await client.post(f"/v1/users/{user_id}/messages", json={"messages": [message]})
    _assert_problem(response, field, "NUL character")
    assert await user_row_counts(db, user_id) == {"memories": 0, "messages": 0, "outbox": 0}


async def test_nul_in_list_filters_and_search_is_a_400(client, user_id) -> None:
    listed = await client.get(f"/v1/users/{user_id}/memories", params={"session_id": NUL})
    _assert_problem(listed, "session_id", "NUL character")
    for body, field in (
        ({"query": NUL}, "query"),
        ({"query": "ok", "session_id": NUL}, "session_id"),
    ):
        searched = await client.post(f"/v1/users/{user_id}/search", json=body)
        _assert_problem(searched, field, "NUL character")


@pytest.mark.parametrize("levels", [33, 1_500])
async def test_deeply_nested_metadata_is_a_400(client, db, user_id, levels) -> None:
    response = await client.post(
        f"/v1/users/{user_id}/memories",
        content=f'{{"content": "ok", "metadata": {_nested(levels)}}}',
        headers={"Content-Type": "application/json"},
    )
    problem = _assert_problem(response, None, "nested")
    assert "32 levels" in problem["detail"] or "too deeply" in problem["detail"]
    assert await user_row_counts(db, user_id) == {"memories": 0, "messages": 0, "outbox": 0}


async def test_metadata_32_levels_deep_is_stored(client, user_id) -> None:
    nested = _nested(31)  # the metadata object itself is the 32nd level
    response = await client.post(
        f"/v1/users/{user_id}/memories",
        content=f'{{"content": "deep but fine", "metadata": {nested}}}',
        headers={"Content-Type": "application/json"},
    )
    assert response.status_code == 201, response.text
    assert response.json()["metadata"] == json.loads(nested)


@pytest.mark.parametrize("as_of", ["0001-01-01T00:00:00Z", "9999-12-31T23:59:59Z"])
async def test_as_of_at_the_calendar_edges_is_a_400(client, user_id, as_of) -> None:
    for query in ("what did I do yesterday", "plans for next month", "last year"):
        response = await client.post(
            f"/v1/users/{user_id}/search", json={"query": query, "as_of": as_of}
        )
        _assert_problem(response, "as_of", "out of range")


async def test_a_year_one_message_is_refused_at_intake(client, db, user_id) -> None:
    response = await client.post(
        f"/v1/users/{user_id}/messages",
        json={
            "messages": [{"content": "I met Ana yesterday", "timestamp": "0001-01-01T10:00:00Z"}]
        },
    )
    _assert_problem(response, "messages[0].timestamp", "out of range")
    assert await user_row_counts(db, user_id) == {"memories": 0, "messages": 0, "outbox": 0}


async def test_a_year_one_event_time_is_refused(client, user_id) -> None:
    response = await client.post(
        f"/v1/users/{user_id}/memories",
        json={"content": "ok", "event_time": "0001-01-01T00:00:00Z"},
    )
    _assert_problem(response, "event_time", "out of range")


@pytest.mark.parametrize("raw_user", ["bob%0A", "bob%0D%0A", "%0Abob"])
async def test_a_user_id_with_a_newline_is_refused(client, raw_user) -> None:
    response = await client.get(f"/v1/users/{raw_user}/memories")
    _assert_problem(response, "user_id", "user_id")


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("search", {"query": "hello", "top_k": "5"}, "top_k"),
        ("search", {"query": "hello", "explain": "true"}, "explain"),
        ("memories", {"content": "ok", "event_time": 0}, "event_time"),
        ("messages", {"messages": [{"content": "ok", "timestamp": 1700000000}]}, None),
    ],
)
async def test_types_are_strict_not_coerced(client, db, user_id, path, body, field) -> None:
    response = await client.post(f"/v1/users/{user_id}/{path}", json=body)
    problem = _assert_problem(response, field, "Expected")
    if field is None:
        assert problem["field"] == "messages[0].timestamp"
    assert await user_row_counts(db, user_id) == {"memories": 0, "messages": 0, "outbox": 0}
