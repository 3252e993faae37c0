"""Inputs that once gave a 500 (or a poisoned ingestion task): each is now a 400 problem+json
that names the field and says what to change, and writes nothing."""

from __future__ import annotations

import json

import pytest

from tests.factories import create_memory, user_row_counts

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


# Issue 42, item 7: a NUL in `category` reached the category lookup in Postgres (500).
CATEGORY_NULS = [
    ("memories", {"content": "ok", "category": NUL}, "category"),
    ("memories", {"content": "ok", "agent_id": NUL}, "agent_id"),
    ("memories", {"content": "ok", "run_id": NUL}, "run_id"),
    ("memories", {"content": "ok", "context": NUL}, "context"),
    (
        "memories/batch",
        {"memories": [{"content": "fine"}, {"content": "ok", "category": NUL}]},
        "memories[1].category",
    ),
    (
        "memories/batch",
        {"memories": [{"content": "fine"}, {"content": "ok", "metadata": {"k": {NUL: 1}}}]},
        "memories[1].metadata",
    ),
]


@pytest.mark.parametrize(("path", "body", "field"), CATEGORY_NULS)
async def test_nul_in_any_field_of_a_create_is_a_400(
    client, db, user_id, path, body, field
) -> None:
    response = await client.post(f"/v1/users/{user_id}/{path}", json=body)
    _assert_problem(response, field, "NUL character")
    assert await user_row_counts(db, user_id) == {"memories": 0, "messages": 0, "outbox": 0}


@pytest.mark.parametrize(
    ("body", "field"),
    [({"category": NUL}, "category"), ({"content": "ok", "metadata": {"a": [NUL]}}, "metadata")],
)
async def test_nul_in_a_patch_is_a_400_and_leaves_the_chain(
    client, db, user_id, body, field
) -> None:
    memory = await create_memory(client, user_id, "I play the cello", category="hobbies")
    response = await client.patch(f"/v1/users/{user_id}/memories/{memory['id']}", json=body)
    _assert_problem(response, field, "NUL character")
    history = (await client.get(f"/v1/users/{user_id}/memories/{memory['id']}/history")).json()
    assert [v["version"] for v in history["versions"]] == [1]
    assert await user_row_counts(db, user_id) == {"memories": 1, "messages": 0, "outbox": 1}


@pytest.mark.parametrize(
    ("path", "params", "field"),
    [
        ("memories", {"category": NUL}, "category"),
        ("memories", {"agent_id": NUL}, "agent_id"),
        ("memories", {"run_id": NUL}, "run_id"),
        ("memories", {"id_prefix": NUL}, "id_prefix"),
        ("export", {"agent_id": NUL}, "agent_id"),
        ("export", {"filters": NUL}, "filters"),
        # A parameter no route reads is still refused: the rule is the door's, not the route's.
        ("memories", {"unread": NUL}, "unread"),
    ],
)
async def test_nul_in_a_query_parameter_is_a_400(client, user_id, path, params, field) -> None:
    await create_memory(client, user_id, "I grow tomatoes", category="hobbies")
    response = await client.get(f"/v1/users/{user_id}/{path}", params=params)
    _assert_problem(response, field, "NUL character")


async def test_nul_in_the_users_list_prefix_is_a_400(client) -> None:
    _assert_problem(await client.get("/v1/users", params={"prefix": NUL}), "prefix", "NUL")


# JSON's \ud800 escape: msgspec refuses a lone surrogate in a body, Python's json module (which
# reads the list's `filters` parameter) lets it through, and Postgres cannot store it.
SURROGATE_FILTERS = [
    ('{"field": "category", "op": "eq", "value": "x\\ud800"}', "filters.value"),
    ('{"field": "metadata.k\\udc00", "op": "eq", "value": "x"}', "filters.field"),
    ('{"field": "metadata.k", "op": "in", "value": ["a", "\\ud800"]}', "filters.value[1]"),
    ('{"field": "metadata.k", "op": "contains", "value": "\\u0000"}', "filters.value"),
]


@pytest.mark.parametrize(("filters", "field"), SURROGATE_FILTERS)
async def test_unstorable_text_in_a_list_filter_is_a_400(client, user_id, filters, field) -> None:
    await create_memory(client, user_id, "I grow tomatoes", metadata={"k": "v"})
    for path in ("memories", "export"):
        response = await client.get(f"/v1/users/{user_id}/{path}", params={"filters": filters})
        _assert_problem(response, field, "cannot be stored")


@pytest.mark.parametrize("escaped", ["\\ud800", "\\udfff", "x\\ud800y"])
async def test_a_lone_surrogate_in_a_body_is_a_400(client, db, user_id, escaped) -> None:
    """msgspec refuses one as malformed JSON ("Input data was truncated"): the answer names
    the field and the character instead, as for a NUL."""
    for path, body, field in (
        ("memories", f'{{"content": "ok", "category": "{escaped}"}}', "category"),
        ("memories", f'{{"content": "ok", "metadata": {{"{escaped}": 1}}}}', "metadata"),
        ("messages", f'{{"messages": [{{"content": "{escaped}"}}]}}', "messages[0].content"),
        ("search", f'{{"query": "{escaped}"}}', "query"),
    ):
        response = await client.post(
            f"/v1/users/{user_id}/{path}",
            content=body,
            headers={"Content-Type": "application/json"},
        )
        _assert_problem(response, field, "unpaired UTF-16 surrogate")
    assert await user_row_counts(db, user_id) == {"memories": 0, "messages": 0, "outbox": 0}


async def test_nul_in_list_filters_and_search_is_a_400(client, user_id) -> None:
    listed = await client.get(f"/v1/users/{user_id}/memories", params={"session_id": NUL})
    _assert_problem(listed, "session_id", "NUL character")
    for body, field in (
        ({"query": NUL}, "query"),
        ({"query": "ok", "session_id": NUL}, "session_id"),
        ({"query": "ok", "agent_id": NUL}, "agent_id"),
        ({"query": "ok", "filters": {"field": "category", "op": "eq", "value": NUL}}, "filters"),
        (
            {"query": "ok", "filters": {"field": f"metadata.{NUL}", "op": "exists", "value": True}},
            "filters",
        ),
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
