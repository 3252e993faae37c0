"""Erasing one agent's or one run's part of a user (DELETE /v1/users/{u}?agent_id=&run_id=):
exactly the memories (every version of their chains) and messages of that agent and/or run
leave both stores; the user's shared memories, other agents' and runs', and other users' stay;
no write is refused; an audit row says the scope, never the content."""

from __future__ import annotations

import inspect
import json

import httpx
import pytest
from cognis_client import AsyncCognisClient, CognisClient, _calls
from sqlalchemy import text

from tests.conftest import API_KEY
from tests.factories import indexed_document, search
from tests.retrieval.test_agents_runs import LEGS, MEMORIES, QUERY
from tests.retrieval.test_pipeline_api import _load

pytestmark = [pytest.mark.usefixtures("ingest_worker"), pytest.mark.xdist_group("erase_scope")]

# shared, a1, a2, a1r1 (agent a1, run r1), r2 (run r2, no agent); each leg alone and both.
A1_PATCHED = "My hiking trip to the Rocky mountains took ten days"
MOVED = "My hiking trip to the Rocky mountains was shared with everyone"
PARROT = "I adopted a parrot called Kiwi"  # a message of a1's: its memory is a1's


def _names(contents: set[str]) -> set[str]:
    """The memories of the set among these contents (the message "Hi" may leave one too)."""
    by_content = {m["content"]: name for name, m in MEMORIES.items()}
    by_content.update({A1_PATCHED: "a1", MOVED: "moved", PARROT: "parrot"})
    return {by_content[c] for c in contents if c in by_content}


@pytest.fixture
async def loaded(client, opensearch, index_name, user_id, other_user_id) -> dict[str, dict]:
    created = await _load(client, opensearch, index_name, user_id, list(MEMORIES.values()))
    by_content = {m["content"]: m for m in created}
    loaded = {name: by_content[m["content"]] for name, m in MEMORIES.items()}
    # a1's memory gets a second version; the chain goes whole.
    patched = await client.patch(
        f"/v1/users/{user_id}/memories/{loaded['a1']['id']}", json={"content": A1_PATCHED}
    )
    assert patched.status_code == 200, patched.text
    loaded["a1v2"] = patched.json()
    # A memory a1 wrote and then shared (its latest version has no agent): the user's now.
    (moved,) = await _load(
        client, opensearch, index_name, user_id, [{"content": MOVED, "agent_id": "a1"}]
    )
    shared = await client.patch(
        f"/v1/users/{user_id}/memories/{moved['id']}", json={"agent_id": None}
    )
    assert shared.status_code == 200, shared.text
    loaded["moved"] = shared.json()
    # Another user with the same agent and run.
    loaded["other"] = (
        await _load(client, opensearch, index_name, other_user_id, [dict(MEMORIES["a1r1"])])
    )[0]
    # A message of a1 (its memory inherits the agent) and one of no agent.
    for content, scope in ((PARROT, {"agent_id": "a1"}), ("Hi", {})):
        said = await client.post(
            f"/v1/users/{user_id}/messages",
            params={"wait": "true"},
            json={"messages": [{"content": content, **scope}]},
        )
        assert said.status_code == 200 and said.json()["state"] == "done", said.text
    return loaded


async def _listed(client, user_id: str) -> set[str]:
    response = await client.get(
        f"/v1/users/{user_id}/memories", params={"include_superseded": "true", "limit": 200}
    )
    assert response.status_code == 200, response.text
    return {m["content"] for m in response.json()["items"]}


async def _found(client, user_id: str, leg: dict) -> set[str]:
    found = await search(
        client, user_id, QUERY, top_k=50, stages=leg, min_relevance=0, consistency="indexed"
    )
    return {r["memory"]["content"] for r in found["results"]}


async def _rows(db, sql: str, **params) -> list:
    async with db.connect() as connection:
        return list((await connection.execute(text(sql), params)).all())


async def test_an_agents_erase_removes_its_memories_and_messages_from_both_stores_only(
    loaded, client, db, opensearch, index_name, user_id, other_user_id
) -> None:
    # The parrot does not match the query's words (the keyword leg misses it): the list has it.
    hiking = set(MEMORIES) | {"moved"}
    for leg in LEGS.values():
        assert _names(await _found(client, user_id, leg)) - {"parrot"} == hiking
    assert _names(await _listed(client, user_id)) == hiking | {"parrot"}
    parrot = await search(client, user_id, PARROT, top_k=50, min_relevance=0)
    assert PARROT in {r["memory"]["content"] for r in parrot["results"]}
    doomed = [loaded[name]["id"] for name in ("a1", "a1v2", "a1r1")]
    before = await _rows(
        db, "SELECT count(*) FROM messages WHERE user_id = :u AND agent_id = 'a1'", u=user_id
    )
    assert before[0][0] == 1

    response = await client.delete(f"/v1/users/{user_id}", params={"agent_id": "a1"})
    assert response.status_code == 200, response.text
    receipt = response.json()
    kept = {"shared", "a2", "r2", "moved"}
    assert (receipt["agent_id"], receipt["run_id"]) == ("a1", None)
    # a1's two chains (three versions) and the parrot memory of its message, one message.
    assert receipt["postgres"]["memories"] == 4, receipt
    assert receipt["postgres"]["messages"] == 1, receipt
    assert receipt["opensearch_deleted"] == 4 and receipt["opensearch_pending"] is False
    assert receipt["writes_refused_until"] is None
    assert "no write is refused" in receipt["guarantee"]

    # Search, in each leg alone and both: a1's memories are gone, the rest stays.
    for name, leg in LEGS.items():
        assert _names(await _found(client, user_id, leg)) == kept, name
    parrot = await search(client, user_id, PARROT, top_k=50, min_relevance=0)
    assert PARROT not in {r["memory"]["content"] for r in parrot["results"]}
    assert _names(await _listed(client, user_id)) == kept
    # Even a1's search sees the shared ones only.
    as_a1 = await search(client, user_id, QUERY, top_k=50, agent_id="a1", min_relevance=0)
    assert _names({r["memory"]["content"] for r in as_a1["results"]}) == {"shared", "r2", "moved"}
    exported = await client.get(f"/v1/users/{user_id}/export", params={"versions": "all"})
    assert exported.status_code == 200, exported.text
    lines = [json.loads(line) for line in exported.text.splitlines()]
    contents = {line["content"] for line in lines}
    assert _names(contents) == kept
    for memory_id in doomed:
        history = await client.get(f"/v1/users/{user_id}/memories/{memory_id}/history")
        assert history.status_code == 404, history.text
        assert await indexed_document(opensearch, index_name, memory_id) is None
    # The moved memory keeps its whole history, a1's version included: it is shared now.
    history = await client.get(f"/v1/users/{user_id}/memories/{loaded['moved']['id']}/history")
    assert history.status_code == 200 and len(history.json()["versions"]) == 2, history.text

    # Postgres: nothing of a1 is left, no message, no outbox event carrying its content.
    left = await _rows(
        db,
        "SELECT (SELECT count(*) FROM memories WHERE user_id = :u AND agent_id = 'a1'"
        "        AND chain_id <> CAST(:moved AS uuid)),"
        " (SELECT count(*) FROM messages WHERE user_id = :u AND agent_id = 'a1'),"
        " (SELECT count(*) FROM outbox WHERE user_id = :u AND op = 'index'"
        "        AND memory_id = ANY(CAST(:ids AS uuid[]))),"
        " (SELECT count(*) FROM messages WHERE user_id = :u AND agent_id IS NULL)",
        u=user_id,
        moved=loaded["moved"]["chain_id"],
        ids=doomed,
    )
    assert left == [(0, 0, 0, 1)]
    # The other user's a1 memory stays in both stores.
    kept = await client.get(f"/v1/users/{other_user_id}/memories/{loaded['other']['id']}")
    assert kept.status_code == 200, kept.text
    assert await indexed_document(opensearch, index_name, loaded["other"]["id"]) is not None
    for name in ("shared", "a2", "r2"):
        assert await indexed_document(opensearch, index_name, loaded[name]["id"]) is not None

    # The audit row: the scope and counts, no content.
    audit = await _rows(
        db,
        "SELECT agent_id, run_id, memories, versions, messages FROM scope_erasures"
        " WHERE user_id = :u",
        u=user_id,
    )
    assert audit == [("a1", None, 3, 4, 1)]

    # No write is refused: a1 may write again at once.
    again = await client.post(
        f"/v1/users/{user_id}/memories", json={"content": "I like maps", "agent_id": "a1"}
    )
    assert again.status_code == 201, again.text


async def test_a_runs_erase_and_an_agents_run_erase(loaded, client, db, user_id) -> None:
    both = await client.delete(f"/v1/users/{user_id}", params={"agent_id": "a1", "run_id": "r1"})
    assert both.status_code == 200, both.text
    assert both.json()["postgres"]["memories"] == 1, both.text
    listed = _names(await _listed(client, user_id))
    assert listed == {"shared", "a1", "a2", "r2", "moved", "parrot"}

    run = await client.delete(f"/v1/users/{user_id}", params={"run_id": "r2"})
    assert run.status_code == 200, run.text
    assert (run.json()["agent_id"], run.json()["run_id"]) == (None, "r2")
    assert run.json()["postgres"]["memories"] == 1, run.text
    for leg in LEGS.values():
        found = _names(await _found(client, user_id, leg)) - {"parrot"}
        assert found == {"shared", "a1", "a2", "moved"}
    audit = await _rows(
        db,
        "SELECT agent_id, run_id, versions FROM scope_erasures WHERE user_id = :u ORDER BY id",
        u=user_id,
    )
    assert audit == [("a1", "r1", 1), (None, "r2", 1)]

    # Erasing the whole user removes the audit rows with everything else.
    whole = await client.delete(f"/v1/users/{user_id}")
    assert whole.status_code == 200, whole.text
    assert (
        whole.json()["agent_id"] is None and "began before erased_at" in whole.json()["guarantee"]
    )
    assert whole.json()["postgres"]["scope_erasures"] == 2, whole.text


async def test_a_stored_idempotent_response_of_an_erased_memory_goes(client, db, user_id) -> None:
    path = f"/v1/users/{user_id}/memories"
    keys = {"a1": f"k-a1-{user_id}", "a2": f"k-a2-{user_id}"}
    for agent, key in keys.items():
        made = await client.post(
            path,
            json={"content": f"A note of {agent}", "agent_id": agent},
            headers={"Idempotency-Key": key},
        )
        assert made.status_code == 201, made.text
    erased = await client.delete(f"/v1/users/{user_id}", params={"agent_id": "a1"})
    assert erased.status_code == 200, erased.text
    assert erased.json()["postgres"]["idempotency_keys"] == 1, erased.text
    stored = await _rows(db, "SELECT key FROM idempotency_keys WHERE user_id = :u", u=user_id)
    assert stored == [(keys["a2"],)]


async def test_bad_agent_and_run_ids_are_400s_naming_the_field(client, user_id) -> None:
    made = await client.post(
        f"/v1/users/{user_id}/memories", json={"content": "Keep me", "agent_id": "a1"}
    )
    assert made.status_code == 201, made.text
    for params, field in (
        ({"agent_id": ""}, "agent_id"),
        ({"run_id": "r" * 257}, "run_id"),
        ({"agent_id": "a1", "run_id": "bad\x00"}, "run_id"),
    ):
        response = await client.delete(f"/v1/users/{user_id}", params=params)
        assert response.status_code == 400, (params, response.text)
        assert response.headers["content-type"].startswith("application/problem+json")
        assert field in json.dumps(response.json()), (params, response.json())
    # Nothing was erased.
    kept = await client.get(f"/v1/users/{user_id}/memories/{made.json()['id']}")
    assert kept.status_code == 200, kept.text


async def test_the_python_client_erases_an_agent(inprocess_api, client, user_id) -> None:
    for agent in ("a1", "a2"):
        made = await client.post(
            f"/v1/users/{user_id}/memories", json={"content": f"Of {agent}", "agent_id": agent}
        )
        assert made.status_code == 201, made.text
    transport = httpx.ASGITransport(app=inprocess_api.app)
    async with AsyncCognisClient(inprocess_api.url, api_key=API_KEY, transport=transport) as cognis:
        receipt = await cognis.erase_user(user_id, agent_id="a1")
    assert (receipt.agent_id, receipt.run_id, receipt.writes_refused_until) == ("a1", None, None)
    assert receipt.postgres["memories"] == 1 and receipt.opensearch_pending is False
    left = (await client.get(f"/v1/users/{user_id}/memories")).json()["items"]
    assert [m["content"] for m in left] == ["Of a2"]


def test_the_sync_client_sends_the_scope_and_only_the_scope_given() -> None:
    with CognisClient("http://cognis.invalid", api_key=API_KEY) as cognis:
        scoped = _calls.erase_user("alice", "a1", "r1").request(cognis.http)
        whole = _calls.erase_user("alice").request(cognis.http)
        signature = inspect.signature(cognis.erase_user)
    assert scoped.method == "DELETE" and scoped.url.path == "/v1/users/alice"
    assert dict(scoped.url.params) == {"agent_id": "a1", "run_id": "r1"}
    assert whole.url.params == httpx.QueryParams()
    assert {"agent_id", "run_id"} <= set(signature.parameters)
