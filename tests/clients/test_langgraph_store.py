"""CognisStore (cognis_client.langgraph) against the real API: LangGraph's BaseStore operations,
and a small graph that stores a fact in one run and recalls it in another (no LLM)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import TypedDict

import httpx
import pytest
from cognis_client.langgraph import CognisStore
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.store.base import InvalidNamespaceError
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.conftest import API_KEY, ApiProcess
from tests.tenants.helpers import new_tenant


@pytest.fixture
async def store(api: ApiProcess) -> AsyncIterator[CognisStore]:
    cognis = CognisStore(api.url, api_key=API_KEY, prefix=("memories",))
    yield cognis
    await cognis.aclose()


class Turn(TypedDict, total=False):
    user_id: str
    message: str
    recalled: list[str]


async def remember_or_recall(state: Turn, runtime: Runtime) -> Turn:
    """A deterministic agent: "Remember: <fact>" stores the fact; anything else recalls."""
    assert runtime.store is not None
    namespace = ("memories", state["user_id"])
    message = state["message"]
    if message.startswith("Remember: "):
        fact = message.removeprefix("Remember: ")
        await runtime.store.aput(namespace, uuid.uuid4().hex, {"content": fact})
        return {"recalled": []}
    found = await runtime.store.asearch(namespace, query=message, limit=1)
    return {"recalled": [item.value["content"] for item in found]}


def agent(store: CognisStore):
    graph = StateGraph(Turn)
    graph.add_node("memory", remember_or_recall)
    graph.add_edge(START, "memory")
    graph.add_edge("memory", END)
    return graph.compile(store=store)


async def test_a_graph_recalls_in_a_later_run_what_it_stored(
    store: CognisStore, client: httpx.AsyncClient, user_id: str, other_user_id: str
) -> None:
    app = agent(store)
    await app.ainvoke({"user_id": user_id, "message": "Remember: My sister Maja is a pilot."})
    await app.ainvoke({"user_id": user_id, "message": "Remember: I drink my coffee black."})

    later = await app.ainvoke({"user_id": user_id, "message": "What does my sister do?"})
    assert later["recalled"] == ["My sister Maja is a pilot."]
    stranger = await app.ainvoke({"user_id": other_user_id, "message": "What does my sister do?"})
    assert stranger["recalled"] == []

    # Stored as ordinary memories of that user, with the item's key in their metadata.
    listed = (await client.get(f"/v1/users/{user_id}/memories")).json()["items"]
    assert sorted(m["content"] for m in listed) == [
        "I drink my coffee black.",
        "My sister Maja is a pilot.",
    ]
    assert all(len(m["metadata"]["langgraph"]["key"]) == 32 for m in listed)


async def test_put_get_update_delete_keep_a_version_chain(
    store: CognisStore, client: httpx.AsyncClient, user_id: str
) -> None:
    ns = ("memories", user_id)
    await store.aput(ns, "diet", {"content": "Ana eats no meat.", "kind": "diet"})
    first = await store.aget(ns, "diet")
    assert first is not None and first.value == {"content": "Ana eats no meat.", "kind": "diet"}
    assert first.namespace == ns and first.key == "diet"

    await store.aput(ns, "diet", {"content": "Ana eats no meat.", "kind": "diet"})  # unchanged
    await store.aput(ns, "diet", {"content": "Ana is vegan now.", "kind": "diet"})
    second = await store.aget(ns, "diet")
    assert second is not None and second.value["content"] == "Ana is vegan now."
    assert second.created_at == first.created_at and second.updated_at > first.updated_at

    only_diet = await store.asearch(ns, filter={"kind": "diet"})
    assert [i.key for i in only_diet] == ["diet"] and only_diet[0].score is None
    assert await store.asearch(ns, filter={"kind": "travel"}) == []

    memories = (await client.get(f"/v1/users/{user_id}/memories")).json()["items"]
    (current,) = memories
    history = (await client.get(f"/v1/users/{user_id}/memories/{current['id']}/history")).json()
    assert [v["content"] for v in history["versions"]] == ["Ana eats no meat.", "Ana is vegan now."]

    # Changed by other means (a REST PATCH): the item's value says what the memory says now.
    patched = await client.patch(
        f"/v1/users/{user_id}/memories/{current['id']}", json={"content": "Ana eats fish again."}
    )
    assert patched.status_code == 200, patched.text
    third = await store.aget(ns, "diet")
    assert third is not None and third.value == {"content": "Ana eats fish again.", "kind": "diet"}

    await store.adelete(ns, "diet")
    assert await store.aget(ns, "diet") is None
    ended = (await client.get(f"/v1/users/{user_id}/memories/{patched.json()['id']}")).json()
    assert ended["is_current"] is False


async def test_the_third_level_is_an_agent_and_a_prefix_covers_what_lies_beneath(
    store: CognisStore, client: httpx.AsyncClient, user_id: str
) -> None:
    hotel = {"content": "Room 412 at Hotel Ora."}
    await store.aput(("memories", user_id, "planner"), "hotel", hotel)
    await store.aput(("memories", user_id), "home", {"content": "Ana lives in Porto."})

    listed = (await client.get(f"/v1/users/{user_id}/memories")).json()["items"]
    agents = {m["content"]: m["agent_id"] for m in listed}
    assert agents == {"Room 412 at Hotel Ora.": "planner", "Ana lives in Porto.": None}
    assert all(m["scope"] == "USER" for m in listed)

    # The agent's namespace holds its items only; the user's namespace, as a prefix, both.
    in_agent = await store.asearch(("memories", user_id, "planner"), query="hotel room number")
    assert [(i.key, i.namespace) for i in in_agent] == [("hotel", ("memories", user_id, "planner"))]
    assert in_agent[0].score is not None and 0 < in_agent[0].score <= 1
    # The user's namespace as a prefix: the agent's items too ("home" is no answer to the
    # query: below the default relevance floor); listed, both.
    user_wide = await store.asearch(("memories", user_id), query="hotel room number")
    assert [(i.key, i.namespace) for i in user_wide] == [
        ("hotel", ("memories", user_id, "planner"))
    ]
    listed_wide = await store.asearch(("memories", user_id))
    assert {(i.key, i.namespace) for i in listed_wide} == {
        ("hotel", ("memories", user_id, "planner")),
        ("home", ("memories", user_id)),
    }
    assert await store.aget(("memories", user_id), "hotel") is None
    assert await store.aget(("memories", user_id, "other-agent"), "hotel") is None
    got = await store.aget(("memories", user_id, "planner"), "hotel")
    assert got is not None and got.value == {"content": "Room 412 at Hotel Ora."}


async def test_namespaces_are_listed_and_a_prefix_search_spans_users(
    api: ApiProcess, admin: httpx.AsyncClient, user_id: str, other_user_id: str
) -> None:
    # A tenant of its own: its users are this test's only.
    tenant = await new_tenant(admin, "langgraph")
    store = CognisStore(api.url, api_key=tenant.key)
    mine, theirs = user_id, other_user_id
    try:
        await store.aput((mine,), "a", {"content": "Ana keeps bees on the roof."})
        await store.aput((mine, "coach"), "b", {"content": "Ana runs 10 km on Sundays."})
        await store.aput((theirs, "chef"), "c", {"content": "Ben keeps bees in the garden."})

        everything = await store.alist_namespaces()
        assert everything == sorted([(mine,), (mine, "coach"), (theirs, "chef")])
        assert await store.alist_namespaces(prefix=(mine,)) == [(mine,), (mine, "coach")]
        assert await store.alist_namespaces(suffix=("chef",)) == [(theirs, "chef")]
        assert await store.alist_namespaces(prefix=("*", "coach")) == [(mine, "coach")]
        # Cut at the user: a user with an agent's items only has a namespace there too.
        assert await store.alist_namespaces(max_depth=1) == sorted([(mine,), (theirs,)])
        assert await store.alist_namespaces(limit=1, offset=1) == everything[1:2]

        # Across users: merged by relevance, each item in its own namespace.
        bees = await store.asearch((), query="who keeps bees", limit=2)
        assert {(i.namespace, i.key) for i in bees} == {((mine,), "a"), ((theirs, "chef"), "c")}
        assert [i.score for i in bees] == sorted((i.score for i in bees), reverse=True)
        assert [i.key for i in await store.asearch((), limit=10)] == ["c", "b", "a"]
        assert [i.key for i in await store.asearch((theirs,), limit=10)] == ["c"]
    finally:
        await store.aclose()


async def test_memories_from_other_paths_are_items_keyed_by_their_chain(
    store: CognisStore, client: httpx.AsyncClient, user_id: str
) -> None:
    created = await client.post(
        f"/v1/users/{user_id}/memories",
        json={"content": "Ana plays the oboe.", "category": "hobbies"},
    )
    memory = created.json()
    (item,) = await store.asearch(("memories", user_id), query="musical instrument")
    assert item.key == memory["chain_id"]
    assert item.value == {"content": "Ana plays the oboe.", "category": "hobbies"}
    fetched = await store.aget(("memories", user_id), memory["chain_id"])
    assert fetched is not None and fetched.value == item.value
    # The id of a memory in another namespace (an agent's) is not found in this one.
    assert await store.aget(("memories", user_id, "s9"), memory["chain_id"]) is None
    # An update by other means makes a new version: the key stays, and names the new text.
    updated = await client.patch(
        f"/v1/users/{user_id}/memories/{memory['id']}", json={"content": "Ana plays the flute."}
    )
    assert updated.status_code == 200 and updated.json()["id"] == memory["id"]
    assert updated.json()["version_id"] != memory["version_id"]
    (again,) = await store.asearch(("memories", user_id), query="musical instrument")
    assert again.key == item.key
    fetched = await store.aget(("memories", user_id), item.key)
    assert fetched is not None and fetched.value["content"] == "Ana plays the flute."
    # A put on that key writes the next version of the same chain, not a second item.
    await store.aput(("memories", user_id), item.key, {"content": "Ana plays the cello."})
    items = await store.asearch(("memories", user_id), query="musical instrument")
    assert [(i.key, i.value["content"]) for i in items] == [(item.key, "Ana plays the cello.")]


def test_sync_methods_and_refusals(api: ApiProcess, user_id: str) -> None:
    store = CognisStore(api.url, api_key=API_KEY)
    store.put((user_id,), "tea", {"content": "Ana likes green tea."})
    item = store.get((user_id,), "tea")
    assert item is not None and item.value == {"content": "Ana likes green tea."}
    assert item.namespace == (user_id,)
    with pytest.raises(InvalidNamespaceError):
        store.get(("a", "b", "c"), "tea")
    assert (user_id,) in store.list_namespaces(prefix=(user_id,))


async def test_a_put_repeated_while_the_first_is_in_flight_is_done_once(
    store: CognisStore, client: httpx.AsyncClient, user_id: str
) -> None:
    """Both puts find the same version and send the same idempotency key (derived from that
    version and the value): one new version, and neither put fails."""
    namespace = ("memories", user_id)
    await store.aput(namespace, "city", {"content": "Lives in Tokyo"})
    await asyncio.gather(
        store.aput(namespace, "city", {"content": "Lives in Osaka"}),
        store.aput(namespace, "city", {"content": "Lives in Osaka"}),
    )
    item = await store.aget(namespace, "city")
    assert item is not None and item.value == {"content": "Lives in Osaka"}
    listed = await client.get(f"/v1/users/{user_id}/memories", params={"include_superseded": True})
    assert sorted(m["content"] for m in listed.json()["items"]) == [
        "Lives in Osaka",
        "Lives in Tokyo",
    ]


async def test_a_filter_is_pushed_into_the_search_not_applied_to_its_top_100(
    store: CognisStore, client: httpx.AsyncClient, user_id: str
) -> None:
    """111 items about the same thing: the one the filter names is found with a query too
    (it used to be missed when it fell outside the top 100), and operators work."""
    ns = ("memories", user_id)
    # Different enough that de-duplication (>= 0.99 cosine) keeps every one.
    plants = ("tomatoes", "basil", "carrots", "roses", "tulips", "beans", "mint", "kale")
    places = ("fence", "shed", "pond", "gate", "oak tree", "greenhouse", "wall")
    contents = [
        f"In week {i} I planted {plants[i % 8]} in the garden by the {places[i % 7]}"
        for i in range(111)
    ]
    items = [
        {
            "content": content,
            "metadata": {"langgraph": {"key": f"k{i}", "value": {"content": content, "n": i}}},
        }
        for i, content in enumerate(contents)
    ]
    for start in (0, 100):
        made = await client.post(
            f"/v1/users/{user_id}/memories/batch", json={"memories": items[start : start + 100]}
        )
        assert made.status_code == 201, made.text
    for query in (None, "what did I plant in the garden"):
        found = await store.asearch(ns, query=query, filter={"n": 110})
        assert [i.key for i in found] == ["k110"], query
        above = await store.asearch(ns, query=query, filter={"n": {"$gt": 107}}, limit=10)
        assert sorted(i.key for i in above) == ["k108", "k109", "k110"], query
        between = await store.asearch(
            ns, query=query, filter={"n": {"$gte": 3, "$lt": 5}}, limit=10
        )
        assert sorted(i.key for i in between) == ["k3", "k4"], query
    with pytest.raises(ValueError, match=r"operator '\$in' is not supported"):
        await store.asearch(ns, query="garden", filter={"n": {"$in": [1, 2]}})


async def _expires_at(client: httpx.AsyncClient, user_id: str) -> list[datetime | None]:
    items = (await client.get(f"/v1/users/{user_id}/memories")).json()["items"]
    return [datetime.fromisoformat(m["expires_at"]) if m["expires_at"] else None for m in items]


async def test_ttl_in_minutes_expires_items_and_reads_do_not_refresh_it(
    store: CognisStore, client: httpx.AsyncClient, db: AsyncEngine, user_id: str
) -> None:
    assert store.supports_ttl is True
    ns = ("memories", user_id)
    before = datetime.now(UTC)
    await store.aput(ns, "parking", {"content": "The car is on level 3."}, ttl=30)
    (expires_at,) = await _expires_at(client, user_id)
    assert expires_at is not None
    assert before + timedelta(minutes=30) <= expires_at <= datetime.now(UTC) + timedelta(minutes=30)
    # Reads never write: refresh_ttl is accepted and the expiry stays (the module's note).
    assert await store.aget(ns, "parking", refresh_ttl=True) is not None
    assert await _expires_at(client, user_id) == [expires_at]
    # A put of the same value with a ttl moves the expiry; with ttl=None it clears it.
    await store.aput(ns, "parking", {"content": "The car is on level 3."}, ttl=60)
    (moved,) = await _expires_at(client, user_id)
    assert moved is not None and moved > expires_at
    await store.aput(ns, "parking", {"content": "The car is on level 3."}, ttl=None)
    assert await _expires_at(client, user_id) == [None]
    await store.aput(ns, "parking", {"content": "The car is on level 4."}, ttl=5)
    # Its time runs out (moved to the past in the database): the item is gone at once.
    async with db.begin() as connection:
        await connection.execute(
            text("UPDATE memories SET expires_at = now() - interval '1 second' WHERE user_id = :u"),
            {"u": user_id},
        )
    assert await store.aget(ns, "parking") is None
    assert await store.asearch(ns, query="where is the car") == []
    assert await store.asearch(ns) == []


async def test_a_default_ttl_from_the_ttl_config(
    api: ApiProcess, client: httpx.AsyncClient, user_id: str
) -> None:
    store = CognisStore(
        api.url, api_key=API_KEY, prefix=("memories",), ttl_config={"default_ttl": 10}
    )
    try:
        await store.aput(("memories", user_id), "k", {"content": "A ten-minute note."})
        await store.aput(("memories", user_id), "j", {"content": "A lasting note."}, ttl=None)
    finally:
        await store.aclose()
    expiries = sorted(await _expires_at(client, user_id), key=lambda e: e is None)
    assert expiries[1] is None
    assert expiries[0] is not None
    assert expiries[0] - datetime.now(UTC) <= timedelta(minutes=10)
    assert expiries[0] - datetime.now(UTC) > timedelta(minutes=9)


async def _scenario(store, user: str, other: str) -> list[object]:
    """One sequence of LangGraph store calls; what each read returns, in comparable form
    (namespace, key, value; no scores, ids or times: those are the stores' own)."""
    ns, agent_ns, elsewhere = ("memories", user), ("memories", user, "planner"), ("memories", other)

    def items(found) -> list[tuple]:
        return sorted((tuple(i.namespace), i.key, i.value) for i in found)

    seen: list[object] = []
    await store.aput(ns, "diet", {"content": "Ana eats no meat.", "kind": "diet", "n": 1})
    await store.aput(ns, "city", {"content": "Ana lives in Lisbon.", "kind": "home", "n": 2})
    await store.aput(agent_ns, "plan", {"content": "Book the train.", "kind": "task", "n": 3})
    await store.aput(elsewhere, "diet", {"content": "Ben eats everything.", "kind": "diet"})
    got = await store.aget(ns, "diet")
    seen.append(None if got is None else (got.key, got.value))
    seen.append(await store.aget(ns, "missing"))
    await store.aput(ns, "diet", {"content": "Ana is vegan now.", "kind": "diet", "n": 4})
    got = await store.aget(ns, "diet")
    seen.append(None if got is None else (got.key, got.value))
    seen.append(items(await store.asearch(ns, limit=10)))  # the user and what lies beneath
    seen.append(items(await store.asearch(agent_ns, limit=10)))
    seen.append(items(await store.asearch(ns, filter={"kind": "diet"}, limit=10)))
    seen.append(items(await store.asearch(ns, filter={"n": {"$gt": 2}}, limit=10)))
    seen.append(items(await store.asearch(ns, filter={"kind": {"$ne": "diet"}}, limit=10)))
    seen.append(sorted(await store.alist_namespaces(prefix=("memories", user))))
    await store.adelete(ns, "city")
    seen.append(await store.aget(ns, "city"))
    seen.append(items(await store.asearch(ns, limit=10)))
    seen.append(items(await store.asearch(elsewhere, limit=10)))
    return seen


async def test_it_answers_as_langgraphs_in_memory_store_does(
    store: CognisStore, user_id: str, other_user_id: str
) -> None:
    """LangGraph ships no store conformance suite: the same calls, made on its InMemoryStore
    and on CognisStore, read the same items (the intended differences, scores and TTL
    refresh, are in the module's docstring and docs/clients.md)."""
    from langgraph.store.memory import InMemoryStore

    reference = await _scenario(InMemoryStore(), user_id, other_user_id)
    ours = await _scenario(store, user_id, other_user_id)
    assert ours == reference


def test_one_store_serves_one_event_loop_after_another(api: ApiProcess) -> None:
    """A store kept in a module and used from two asyncio.run calls (each its own loop): the
    second gets a client of its own loop, not the first loop's closed connections."""
    store = CognisStore(api.url, api_key=API_KEY, prefix=("memories",))
    namespace = ("memories", f"u-{uuid.uuid4().hex[:12]}")

    async def put() -> None:
        await store.aput(namespace, "diet", {"content": "Is vegetarian"})

    async def get_and_close() -> str | None:
        item = await store.aget(namespace, "diet")
        await store.aclose()
        return None if item is None else str(item.value["content"])

    asyncio.run(put())
    assert asyncio.run(get_and_close()) == "Is vegetarian"
    # And the synchronous methods beside them.
    assert store.get(namespace, "diet") is not None
