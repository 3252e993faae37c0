"""Agents and runs as scopes (app/memories/filters/, `visible_to`): what a search and a list
see by default, in each leg and both; the `agent` and `run` filter fields; PATCH; messages
(a derived memory inherits its message's agent and run, and step 3 compares it only with what
that agent sees); imports; the index's documents; bad input.

Every memory of the set matches the query in both legs (they all talk about hiking), so an
unfiltered search returns them all: what a scoped one leaves out, the scope excluded."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.conftest import wait_until
from tests.factories import indexed_document, search
from tests.imports.helpers import NDJSON, jsonl
from tests.retrieval.test_pipeline_api import _load

pytestmark = pytest.mark.xdist_group("agents")

QUERY = "hiking trip in the mountains"
# name -> the memory's fields
MEMORIES: dict[str, dict[str, Any]] = {
    "shared": {"content": "I went hiking in the Alps mountains last summer"},
    "a1": {"content": "My hiking trip to the Rocky mountains was long", "agent_id": "a1"},
    "a2": {"content": "I bought new hiking boots for mountain trips", "agent_id": "a2"},
    "a1r1": {
        "content": "My knee hurts after hiking steep mountain trails",
        "agent_id": "a1",
        "run_id": "r1",
    },
    "r2": {"content": "We planned a hiking trip to the Andes mountains", "run_id": "r2"},
}
EVERY = set(MEMORIES)

# (agent_id, run_id) -> what a search or list naming them sees
VISIBLE: list[tuple[str | None, str | None, set[str]]] = [
    (None, None, EVERY),
    ("a1", None, {"shared", "a1", "a1r1", "r2"}),
    ("a2", None, {"shared", "a2", "r2"}),
    ("nobody", None, {"shared", "r2"}),
    (None, "r1", {"shared", "a1", "a2", "a1r1"}),
    (None, "r2", {"shared", "a1", "a2", "r2"}),
    ("a1", "r1", {"shared", "a1", "a1r1"}),
    ("a2", "r1", {"shared", "a2"}),
]
LEGS = {"vector": {"bm25": False}, "bm25": {"vector": False}, "both": {}}


def _names(items: list[dict]) -> set[str]:
    by_content = {m["content"]: name for name, m in MEMORIES.items()}
    return {by_content[m["content"]] for m in items}


def _scope(agent_id: str | None, run_id: str | None) -> dict[str, str]:
    given = {"agent_id": agent_id, "run_id": run_id}
    return {name: value for name, value in given.items() if value is not None}


@pytest.fixture
async def loaded(client, opensearch, index_name, user_id, other_user_id) -> dict[str, dict]:
    created = await _load(client, opensearch, index_name, user_id, list(MEMORIES.values()))
    # Another user with the same agents and runs: never anyone else's result.
    await _load(
        client,
        opensearch,
        index_name,
        other_user_id,
        [dict(MEMORIES["a1r1"]), dict(MEMORIES["shared"])],
    )
    by_content = {m["content"]: m for m in created}
    return {name: by_content[m["content"]] for name, m in MEMORIES.items()}


async def test_stored_and_indexed_with_their_agent_and_run(loaded, opensearch, index_name):
    for name, fields in MEMORIES.items():
        memory = loaded[name]
        assert memory["agent_id"] == fields.get("agent_id"), name
        assert memory["run_id"] == fields.get("run_id"), name
        document = await indexed_document(opensearch, index_name, memory["id"])
        assert document is not None
        assert document["_source"]["agent_id"] == fields.get("agent_id"), name
        assert document["_source"]["run_id"] == fields.get("run_id"), name


@pytest.mark.parametrize("leg", list(LEGS))
async def test_a_search_sees_its_agents_and_runs_memories_and_the_shared_ones(
    loaded, client, user_id, leg
) -> None:
    for agent_id, run_id, expected in VISIBLE:
        found = await search(
            client, user_id, QUERY, top_k=20, stages=LEGS[leg], **_scope(agent_id, run_id)
        )
        assert _names([r["memory"] for r in found["results"]]) == expected, (agent_id, run_id)
        assert {r["memory"]["user_id"] for r in found["results"]} == {user_id}


async def test_a_list_sees_the_same(loaded, client, user_id) -> None:
    for agent_id, run_id, expected in VISIBLE:
        response = await client.get(
            f"/v1/users/{user_id}/memories", params=_scope(agent_id, run_id)
        )
        assert response.status_code == 200, response.text
        assert _names(response.json()["items"]) == expected, (agent_id, run_id)


FILTERED: list[tuple[dict[str, Any], set[str]]] = [
    ({"field": "agent", "op": "eq", "value": "a1"}, {"a1", "a1r1"}),
    ({"field": "agent", "op": "exists", "value": False}, {"shared", "r2"}),
    ({"field": "agent", "op": "ne", "value": "a1"}, {"shared", "a2", "r2"}),
    ({"field": "agent", "op": "in", "value": ["a2", "zz"]}, {"a2"}),
    ({"field": "run", "op": "exists", "value": True}, {"a1r1", "r2"}),
    ({"field": "run", "op": "nin", "value": ["r1"]}, {"shared", "a1", "a2", "r2"}),
    (
        {"not": {"field": "agent", "op": "exists", "value": True}},
        {"shared", "r2"},
    ),
]


@pytest.mark.parametrize("leg", list(LEGS))
async def test_agent_and_run_are_filter_fields_in_each_leg(loaded, client, user_id, leg) -> None:
    for matching, expected in FILTERED:
        found = await search(client, user_id, QUERY, top_k=20, stages=LEGS[leg], filters=matching)
        assert _names([r["memory"] for r in found["results"]]) == expected, matching
    # A filter narrows what the agent sees, never widens it: a1 asking for a2's memories.
    found = await search(
        client,
        user_id,
        QUERY,
        top_k=20,
        stages=LEGS[leg],
        agent_id="a1",
        filters={"field": "agent", "op": "eq", "value": "a2"},
    )
    assert found["results"] == []


async def test_the_list_filter_takes_agent_and_run(loaded, client, user_id) -> None:
    for matching, expected in FILTERED:
        response = await client.get(
            f"/v1/users/{user_id}/memories", params={"filters": json.dumps(matching)}
        )
        assert response.status_code == 200, response.text
        assert _names(response.json()["items"]) == expected, matching


async def test_patch_moves_a_memory_between_an_agent_and_the_shared_ones(
    loaded, client, user_id, opensearch, index_name
) -> None:
    path = f"/v1/users/{user_id}/memories/{loaded['a1']['id']}"
    kept = await client.patch(path, json={"content": "My hiking trip to the Rockies was long"})
    assert kept.status_code == 200, kept.text
    assert (kept.json()["agent_id"], kept.json()["run_id"]) == ("a1", None)
    moved = await client.patch(
        f"/v1/users/{user_id}/memories/{kept.json()['id']}",
        json={"agent_id": None, "run_id": "r9"},
    )
    assert moved.status_code == 200, moved.text
    assert (moved.json()["agent_id"], moved.json()["run_id"]) == (None, "r9")

    async def indexed() -> bool:
        document = await indexed_document(opensearch, index_name, moved.json()["id"])
        return document is not None

    await wait_until(indexed)
    await opensearch.indices.refresh(index=index_name)
    # Now shared: agent a2 finds it in both legs; run r1 no longer does (it has run r9).
    found = await search(client, user_id, "Rockies", top_k=20, agent_id="a2")
    assert moved.json()["id"] in {r["memory"]["id"] for r in found["results"]}
    for leg in LEGS.values():
        found = await search(client, user_id, "Rockies", top_k=20, stages=leg, run_id="r1")
        assert moved.json()["id"] not in {r["memory"]["id"] for r in found["results"]}


async def test_bad_agent_and_run_values_are_400s_naming_the_field(client, user_id) -> None:
    cases = [
        ("POST", f"/v1/users/{user_id}/memories", {"content": "x", "agent_id": ""}, "agent_id"),
        ("POST", f"/v1/users/{user_id}/memories", {"content": "x", "run_id": 5}, "run_id"),
        ("POST", f"/v1/users/{user_id}/search", {"query": "x", "agent_id": "a" * 257}, "agent_id"),
        ("POST", f"/v1/users/{user_id}/search", {"query": "x", "run_id": "a\x00"}, "run_id"),
        (
            "POST",
            f"/v1/users/{user_id}/search",
            {"query": "x", "filters": {"field": "agent", "op": "gt", "value": "a"}},
            "filters.op",
        ),
        (
            "POST",
            f"/v1/users/{user_id}/messages",
            {"messages": [{"content": "hi", "agent_id": ""}]},
            "agent_id",
        ),
    ]
    for method, path, body, field in cases:
        response = await client.request(method, path, json=body)
        assert response.status_code == 400, (body, response.text)
        assert response.headers["content-type"].startswith("application/problem+json")
        assert field in json.dumps(response.json()), (body, response.json())
    listed = await client.get(f"/v1/users/{user_id}/memories", params={"agent_id": ""})
    assert listed.status_code == 400, listed.text
    assert "agent_id" in json.dumps(listed.json())


async def test_an_idempotency_key_reused_for_another_agent_is_refused(client, user_id) -> None:
    path = f"/v1/users/{user_id}/memories"
    headers = {"Idempotency-Key": f"agents-{user_id}"}
    first = await client.post(
        path, json={"content": "I fly kites", "agent_id": "a1"}, headers=headers
    )
    assert first.status_code == 201, first.text
    again = await client.post(
        path, json={"content": "I fly kites", "agent_id": "a1"}, headers=headers
    )
    assert again.status_code == 201 and again.json()["id"] == first.json()["id"]
    other = await client.post(
        path, json={"content": "I fly kites", "agent_id": "a2"}, headers=headers
    )
    assert other.status_code == 422, other.text
    assert other.json()["code"] == "idempotency_key_reused"


async def test_an_import_line_carries_agent_and_run(client, user_id) -> None:
    lines = [
        {
            "external_id": "e1",
            "content": "I keep bees on the roof",
            "agent_id": "a1",
            "run_id": "r1",
        },
        # mem0's export shape: its agent_id and run_id are read too.
        {"id": "m0-1", "memory": "I play the cello", "agent_id": "a2", "run_id": "r2"},
        {"external_id": "e2", "content": "I like figs", "agent_id": ""},
    ]
    response = await client.post(
        f"/v1/users/{user_id}/import", content=jsonl(lines), headers=NDJSON
    )
    assert response.status_code == 200, response.text
    summary = response.json()
    assert summary["imported"] == 2, summary
    assert [(e["line"], e["field"]) for e in summary["errors"]] == [(3, "agent_id")], summary
    listed = (await client.get(f"/v1/users/{user_id}/memories")).json()["items"]
    assert {(m["content"], m["agent_id"], m["run_id"]) for m in listed} == {
        ("I keep bees on the roof", "a1", "r1"),
        ("I play the cello", "a2", "r2"),
    }


@pytest.mark.usefixtures("ingest_worker")
async def test_a_message_gives_its_memories_its_agent_and_run(client, user_id) -> None:
    async def say(content: str, **scope: str) -> dict:
        response = await client.post(
            f"/v1/users/{user_id}/messages",
            params={"wait": "true"},
            json={"messages": [{"content": content, **scope}]},
        )
        assert response.status_code == 200, response.text
        job = response.json()
        assert job["state"] == "done", job
        (message,) = job["messages"]
        (decision,) = message["decisions"]
        return decision

    added = await say("I adopted a parrot called Kiwi", agent_id="a1", run_id="r1")
    assert added["operation"] == "ADD", added
    memory = (await client.get(f"/v1/users/{user_id}/memories/{added['memory_id']}")).json()
    assert (memory["agent_id"], memory["run_id"]) == ("a1", "r1")
    # Agent a2 does not see a1's memory: the same fact is new to it, and becomes its own.
    other = await say("I adopted a parrot called Kiwi", agent_id="a2")
    assert other["operation"] == "ADD", other
    memory = (await client.get(f"/v1/users/{user_id}/memories/{other['memory_id']}")).json()
    assert (memory["agent_id"], memory["run_id"]) == ("a2", None)
    # a1 (in another run, or none) sees its own: a repeat, nothing stored.
    repeated = await say("I adopted a parrot called Kiwi", agent_id="a1")
    assert repeated["operation"] == "NONE", repeated
    # A shared memory is seen by every agent: a repeat for a3 too.
    shared = await say("My sister lives in Porto")
    assert shared["operation"] == "ADD", shared
    assert (await say("My sister lives in Porto", agent_id="a3"))["operation"] == "NONE"
