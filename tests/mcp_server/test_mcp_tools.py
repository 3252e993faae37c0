"""The MCP server driven by the MCP SDK's own client: over stdio (`python -m app mcp`, a separate
process calling the API) and over streamable HTTP at the API's /mcp, against the real service."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app import __version__
from bench.ports import free_port
from tests.conftest import API_KEY, ROOT, ApiProcess
from tests.factories import deployment_category
from tests.mcp_server.helpers import INITIALIZE

# The stored rows, as the REST API returns them (tools answer compactly by default).
FULL = {"full": True}
TOOLS = {
    "add_memory",
    "add_messages",
    "search_memories",
    "get_memory",
    "update_memory",
    "delete_memory",
    "list_memories",
    "get_context",
    "list_entities",
}


@asynccontextmanager
async def stdio_session(
    api: ApiProcess, user_id: str | None, **settings: str
) -> AsyncIterator[ClientSession]:
    env = {
        "COGNIS_MCP_API_URL": api.url,
        "COGNIS_MCP_API_KEY": API_KEY,
        "PATH": "/usr/bin:/bin",
        # This checkout's code, whichever checkout the virtual environment was installed from.
        "PYTHONPATH": f"{ROOT}:{ROOT / 'clients' / 'python'}",
        **settings,
    }
    if user_id is not None:
        env["COGNIS_MCP_USER_ID"] = user_id
    # The console script Claude Desktop is pointed at (installed with the package).
    params = StdioServerParameters(
        command=str(Path(sys.executable).with_name("cognis-mcp")), env=env, cwd=str(ROOT)
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


@asynccontextmanager
async def answers_withheld(api: ApiProcess) -> AsyncIterator[str]:
    """A loopback proxy in front of the API that passes every request on and drops every answer:
    each attempt reaches the service (a write happens) and its caller then times out, however
    long the caller waits and however loaded the machine is."""
    upstream = httpx.URL(api.url)

    async def relay(caller: asyncio.StreamReader, caller_end: asyncio.StreamWriter) -> None:
        _, service = await asyncio.open_connection(upstream.host, upstream.port)
        try:
            while chunk := await caller.read(65536):
                service.write(chunk)
                await service.drain()
        finally:
            service.close()
            caller_end.close()

    proxy = await asyncio.start_server(relay, "127.0.0.1", 0)
    async with proxy:
        yield f"http://127.0.0.1:{proxy.sockets[0].getsockname()[1]}"


@asynccontextmanager
async def http_session(url: str, headers: dict[str, str]) -> AsyncIterator[ClientSession]:
    async with (
        httpx.AsyncClient(headers=headers, timeout=120) as http,
        streamable_http_client(f"{url}/mcp", http_client=http) as (read, write, _),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def payload(result: CallToolResult) -> Any:
    assert not result.isError, result.content
    if result.structuredContent is not None:
        return result.structuredContent
    return json.loads(result.content[0].text)  # type: ignore[union-attr]


def error_text(result: CallToolResult) -> str:
    assert result.isError
    return " ".join(getattr(c, "text", "") for c in result.content)


async def test_stdio_tools_act_only_for_the_configured_user(
    api: ApiProcess, client: httpx.AsyncClient, user_id: str, other_user_id: str
) -> None:
    theirs = await client.post(
        f"/v1/users/{other_user_id}/memories", json={"content": "Omar hides a spare key."}
    )
    assert theirs.status_code == 201, theirs.text
    async with stdio_session(api, user_id) as mcp:
        tools = (await mcp.list_tools()).tools
        assert {t.name for t in tools} == TOOLS
        # No tool lets the model name a user, an agent or a run: the connection does.
        for tool in tools:
            named = {"user_id", "agent_id", "run_id"} & set(tool.inputSchema["properties"])
            assert not named, (tool.name, named)
        # The listing an agent reads every session is compact (app/mcp_server/schemas.py):
        # no titles, null variants or references, no output schemas (results are text).
        listing = json.dumps([t.model_dump(exclude_none=True) for t in tools])
        # (A schema's title is a key; "title" the entity type is a value of an enum.)
        assert '"title": ' not in listing and '{"type": "null"}' not in listing
        assert "$ref" not in listing and "$defs" not in listing
        assert all("\n" not in (t.description or "") for t in tools)
        assert all(t.outputSchema is None for t in tools)

        tokyo = payload(
            await mcp.call_tool(
                "add_memory",
                {"content": "Noor lives in Tokyo.", "category": "personal_details", **FULL},
            )
        )
        assert tokyo["user_id"] == user_id and tokyo["version"] == 1
        # A user id smuggled into the arguments is ignored: the memory is the configured user's.
        smuggled = await mcp.call_tool(
            "add_memory", {"content": "Noor collects stamps.", "user_id": other_user_id, **FULL}
        )
        assert payload(smuggled)["user_id"] == user_id

        osaka = payload(
            await mcp.call_tool(
                "update_memory",
                {"memory_id": tokyo["id"], "content": "Noor lives in Osaka.", **FULL},
            )
        )
        assert osaka["replaces_id"] == tokyo["id"]
        chain = payload(await mcp.call_tool("get_memory", {"memory_id": osaka["id"]}))
        assert [v["content"] for v in chain["history"]] == [
            "Noor lives in Tokyo.",
            "Noor lives in Osaka.",
        ]
        # Compact: the superseded version says so, the current one does not.
        assert [v.get("current", True) for v in chain["history"]] == [False, True]
        assert chain["memory"] == {
            "id": osaka["id"][:8],
            "content": "Noor lives in Osaka.",
            "category": "personal_details",
            "version": 2,
        }

        found = payload(
            await mcp.call_tool(
                "search_memories", {"query": "Where does Noor live?", "explain": True, **FULL}
            )
        )
        top = found["results"][0]
        assert top["memory"]["content"] == "Noor lives in Osaka."
        assert top["explanation"]["final"]["rank"] == 1
        assert "768d" in top["explanation"]
        assert 0 < top["relevance"] <= 1
        # A floor above the best result: nothing relevant; a filter narrows before ranking.
        floored = await mcp.call_tool(
            "search_memories",
            {"query": "Where does Noor live?", "min_relevance": min(1.0, top["relevance"] + 0.01)},
        )
        assert payload(floored)["results"] == []
        other_category = {"field": "category", "op": "ne", "value": top["memory"]["category"]}
        stamps = payload(
            await mcp.call_tool(
                "search_memories",
                {"query": "Where does Noor live?", "filters": other_category, **FULL},
            )
        )
        assert top["memory"]["id"] not in {r["memory"]["id"] for r in stamps["results"]}

        listed = payload(await mcp.call_tool("list_memories", {"limit": 50, **FULL}))
        assert {m["user_id"] for m in listed["items"]} == {user_id}
        assert "Noor lives in Osaka." in {m["content"] for m in listed["items"]}

        ended = payload(await mcp.call_tool("delete_memory", {"memory_id": osaka["id"], **FULL}))
        assert ended["is_current"] is False

        # Another user's memory, named by its id: the API's 404, as a tool error.
        refused = await mcp.call_tool("get_memory", {"memory_id": theirs.json()["id"]})
        assert "404" in error_text(refused) and "Not found" in error_text(refused)

    others = (await client.get(f"/v1/users/{other_user_id}/memories")).json()["items"]
    assert [m["content"] for m in others] == ["Omar hides a spare key."]


async def test_tools_take_a_deployments_category_and_never_change_one_silently(
    api: ApiProcess, client: httpx.AsyncClient, db: AsyncEngine, user_id: str
) -> None:
    async with (
        deployment_category(db, client, user_id) as custom,
        stdio_session(api, user_id) as mcp,
    ):
        added = payload(
            await mcp.call_tool("add_memory", {"content": "Noor keeps bees.", "category": custom})
        )
        assert added["category"] == custom
        # New content alone: the memory keeps its category (it was once re-classified).
        # By the compact result's short id.
        reworded = payload(
            await mcp.call_tool(
                "update_memory",
                {"memory_id": added["id"], "content": "Noor keeps three hives.", **FULL},
            )
        )
        assert (reworded["replaces_id"][:8], reworded["category"]) == (added["id"], custom)
        refused = await mcp.call_tool(
            "add_memory", {"content": "Noor reads the stars.", "category": "astrology"}
        )
        assert "unknown category 'astrology'" in error_text(refused)
        assert "Fix the argument 'category' and call again" in error_text(refused)
        assert custom in error_text(refused)


async def test_stdio_without_a_configured_user_refuses(api: ApiProcess) -> None:
    async with stdio_session(api, None) as mcp:
        refused = await mcp.call_tool("list_memories", {})
    assert "COGNIS_MCP_USER_ID" in error_text(refused)


async def test_http_endpoint_in_the_api_uses_the_connection_headers(
    api: ApiProcess, client: httpx.AsyncClient, user_id: str, other_user_id: str
) -> None:
    headers = {"X-API-Key": API_KEY, "X-Cognis-User": user_id}
    async with http_session(api.url, headers) as mcp:
        job = payload(
            await mcp.call_tool(
                "add_messages",
                {
                    "messages": [
                        {"content": "I adopted a grey cat called Pixel.", "speaker": "Lea"}
                    ],
                    **FULL,
                },
            )
        )
        assert job["state"] == "done" and job["user_id"] == user_id
        (decision,) = [d for m in job["messages"] for d in m["decisions"]]
        assert decision["operation"] == "ADD"
        found = payload(await mcp.call_tool("search_memories", {"query": "Lea's cat", **FULL}))
        assert found["results"][0]["memory"]["id"] == decision["memory_id"]

    # The same memory through REST: it was written for the header's user, and only for them.
    mine = await client.get(f"/v1/users/{user_id}/memories/{decision['memory_id']}")
    assert mine.status_code == 200
    theirs = await client.get(f"/v1/users/{other_user_id}/memories/{decision['memory_id']}")
    assert theirs.status_code == 404
    async with http_session(api.url, {**headers, "X-Cognis-User": other_user_id}) as mcp:
        other_view = payload(await mcp.call_tool("list_memories", {}))
    assert other_view["items"] == []


async def test_http_endpoint_needs_an_api_key(api: ApiProcess, user_id: str) -> None:
    initialize = INITIALIZE
    accept = {"Accept": "application/json, text/event-stream", "X-Cognis-User": user_id}
    async with httpx.AsyncClient(base_url=api.url, timeout=30) as http:
        anonymous = await http.post("/mcp", json=initialize, headers=accept)
        wrong = await http.post("/mcp", json=initialize, headers={**accept, "X-API-Key": "nope"})
        keyed = await http.post("/mcp", json=initialize, headers={**accept, "X-API-Key": API_KEY})
    for refused in (anonymous, wrong):
        assert refused.status_code == 401
        assert refused.headers["content-type"].startswith("application/problem+json")
        # What to send, and where an MCP client's configuration puts it.
        detail = refused.json()["detail"]
        assert "X-API-Key" in detail and '"headers"' in detail and "X-Cognis-User" in detail
    assert keyed.status_code == 200, keyed.text
    assert keyed.json()["result"]["serverInfo"]["name"] == "cognis-memory"
    assert keyed.json()["result"]["serverInfo"]["version"] == __version__


@pytest.fixture
def mcp_beside(api: ApiProcess) -> Iterator[str]:
    """`python -m app mcp --transport http`: its own process, told only the API's URL."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "app", "mcp", "--transport", "http", "--port", str(port)],
        cwd=ROOT,
        env={
            "COGNIS_MCP_API_URL": api.url,
            "PATH": "/usr/bin:/bin",
            "PYTHONPATH": f"{ROOT}:{ROOT / 'clients' / 'python'}",
        },
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while not _listening(url):
            assert process.poll() is None and time.monotonic() < deadline, "MCP server not up"
            time.sleep(0.25)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


def _listening(url: str) -> bool:
    try:
        httpx.get(url, timeout=2)
    except httpx.TransportError:
        return False
    return True


async def test_http_server_beside_the_api_forwards_the_callers_key(
    mcp_beside: str, user_id: str
) -> None:
    """Each connection's own key and user headers are what reach the API."""
    async with http_session(mcp_beside, {"X-API-Key": API_KEY, "X-Cognis-User": user_id}) as mcp:
        added = payload(await mcp.call_tool("add_memory", {"content": "Noor sings alto.", **FULL}))
    assert added["user_id"] == user_id
    async with http_session(mcp_beside, {"X-API-Key": "wrong", "X-Cognis-User": user_id}) as mcp:
        refused = await mcp.call_tool("list_memories", {})
    assert "401" in error_text(refused)


async def test_write_tools_send_an_idempotency_key_and_name_it_on_failure(
    api: ApiProcess, client: httpx.AsyncClient, user_id: str
) -> None:
    """An agent that retries a write with the key its failure named gets the write once."""
    headers = {"X-API-Key": API_KEY, "X-Cognis-User": user_id}
    key = "agent-retry-1"
    async with http_session(api.url, headers) as mcp:
        first = payload(
            await mcp.call_tool(
                "add_memory", {"content": "Noor sings alto.", "idempotency_key": key}
            )
        )
        again = payload(
            await mcp.call_tool(
                "add_memory", {"content": "Noor sings alto.", "idempotency_key": key}
            )
        )
        missing = await mcp.call_tool(
            "delete_memory", {"memory_id": "00000000-0000-0000-0000-000000000000"}
        )
    assert again["id"] == first["id"]
    listed = (await client.get(f"/v1/users/{user_id}/memories")).json()["items"]
    assert [m["id"][:8] for m in listed] == [first["id"]]
    # Without a key from the agent the tool made one, and tells it how to retry safely.
    assert "404" in error_text(missing) and "idempotency_key='" in error_text(missing)


async def test_add_memory_takes_a_time_to_live(
    api: ApiProcess, client: httpx.AsyncClient, user_id: str
) -> None:
    headers = {"X-API-Key": API_KEY, "X-Cognis-User": user_id}
    async with http_session(api.url, headers) as mcp:
        brief = payload(
            await mcp.call_tool(
                "add_memory", {"content": "Parked on level 3.", "ttl_s": 7200, **FULL}
            )
        )
        lasting = payload(await mcp.call_tool("add_memory", {"content": "I own a red car."}))
        refused = await mcp.call_tool("add_memory", {"content": "Never.", "ttl_s": 0})
    assert refused.isError
    assert brief["expires_at"] is not None and "expires_at" not in lasting
    stored = (await client.get(f"/v1/users/{user_id}/memories/{brief['id']}")).json()
    expires_at = datetime.fromisoformat(stored["expires_at"])
    created_at = datetime.fromisoformat(stored["created_at"])
    assert (
        timedelta(hours=2) - timedelta(minutes=1)
        < expires_at - created_at
        <= timedelta(hours=2, minutes=1)
    )


async def test_get_context_gives_a_block_within_its_budget(
    api: ApiProcess, client: httpx.AsyncClient, user_id: str
) -> None:
    headers = {"X-API-Key": API_KEY, "X-Cognis-User": user_id}
    async with http_session(api.url, headers) as mcp:
        first = payload(await mcp.call_tool("add_memory", {"content": "I live in Lyon.", **FULL}))
        await mcp.call_tool(
            "update_memory", {"memory_id": first["id"], "content": "I live in Nantes."}
        )
        await mcp.call_tool("add_memory", {"content": "I am vegetarian."})
        found = payload(await mcp.call_tool("get_context", {"max_tokens": 100}))
    # An agent with no memories of its own: the shared ones (no agent) are every agent's.
    async with http_session(api.url, {**headers, "X-Cognis-Agent": "none"}) as mcp:
        shared = payload(await mcp.call_tool("get_context", {"query": "x"}))
    assert "I live in Nantes. (changed from: I live in Lyon.)" in found["block"]
    assert "I am vegetarian." in found["block"]
    assert len(found["memory_ids"]) == 2 and found["tokens"] <= 100
    assert not found["truncated"]
    listed = (await client.get(f"/v1/users/{user_id}/memories")).json()["items"]
    assert {m["id"][:8] for m in listed} == set(found["memory_ids"])
    assert set(shared["memory_ids"]) == set(found["memory_ids"])


async def _listed_entities(mcp: ClientSession, expected: int, **arguments: Any) -> list[Any]:
    """list_entities once the API's entity worker has read the memories (a bounded wait)."""
    deadline = time.monotonic() + 90
    while True:
        items = payload(await mcp.call_tool("list_entities", arguments))["items"]
        if len(items) >= expected or time.monotonic() > deadline:
            return items  # type: ignore[no-any-return]
        await asyncio.sleep(0.5)


async def test_entities_of_this_user_and_their_memories(
    api: ApiProcess, client: httpx.AsyncClient, user_id: str, other_user_id: str
) -> None:
    """list_entities reads the connection's user's entities, found by the API's entity worker,
    and with a name an entity's memories; another user's entity is never reachable, by name or
    by id."""
    for owner, content in (
        (user_id, "Melanie took the kids swimming at Lake Tahoe."),
        (user_id, "Mel started a pottery class in Boston."),
        (other_user_id, "Jonas moved to Vienna for work."),
    ):
        created = await client.post(f"/v1/users/{owner}/memories", json={"content": content})
        assert created.status_code == 201, created.text
    headers = {"X-API-Key": API_KEY, "X-Cognis-User": user_id}
    async with http_session(api.url, headers) as mcp:
        listed = await _listed_entities(mcp, 3)
        places = payload(await mcp.call_tool("list_entities", {"type": "place"}))["items"]
        melanie = payload(await mcp.call_tool("list_entities", {"name": "mel", "limit": 5}))
        unknown = await mcp.call_tool("list_entities", {"name": "Jonas"})
        full = payload(await mcp.call_tool("list_entities", {**FULL}))
    async with http_session(api.url, {**headers, "X-Cognis-User": other_user_id}) as mcp:
        theirs = await _listed_entities(mcp, 2)
        boston = next(e for e in full["items"] if e["name"] == "Boston")
        by_our_id = await mcp.call_tool("list_entities", {"name": boston["id"]})
    assert {(e["name"], e["type"]) for e in listed} == {
        ("Melanie", "person"),
        ("Lake Tahoe", "place"),
        ("Boston", "place"),
    }
    # Compact: the name (what `name` takes), type, other names and the count; no ids.
    assert {"name": "Melanie", "type": "person", "aliases": ["Mel"], "memories": 2} in listed
    assert {e["name"] for e in places} == {"Lake Tahoe", "Boston"}
    assert melanie["entity"]["name"] == "Melanie"
    assert sorted(m["content"] for m in melanie["memories"]) == [
        "Mel started a pottery class in Boston.",
        "Melanie took the kids swimming at Lake Tahoe.",
    ]
    assert "no entity of this user is called 'Jonas'" in error_text(unknown)
    assert len(full["items"]) == 3 and uuid.UUID(boston["id"])
    assert {e["name"] for e in theirs} == {"Jonas", "Vienna"}
    assert "404 Not found: entity" in error_text(by_our_id)


async def test_a_name_two_entities_share_is_answered_with_both_types(
    api: ApiProcess, client: httpx.AsyncClient, db: AsyncEngine, user_id: str
) -> None:
    """ "Paris" the place and "Paris" the person: list_entities never guesses which one a name
    means; it lists both with their types, and the type picks one."""
    content = "we met there and it was lovely"  # names nothing: the worker links nothing
    created = await client.post(f"/v1/users/{user_id}/memories", json={"content": content})
    assert created.status_code == 201, created.text
    async with db.begin() as connection:
        for entity_type in ("place", "person"):
            await connection.execute(
                text(
                    "WITH e AS (INSERT INTO entities (tenant_id, user_id, name, type, key) "
                    "SELECT tenant_id, user_id, 'Paris', :type, 'paris' FROM memories "
                    "WHERE id = :memory RETURNING id, tenant_id, user_id) "
                    "INSERT INTO memory_entities (tenant_id, memory_id, entity_id, user_id, "
                    "mention) SELECT tenant_id, :memory, id, user_id, 'Paris' FROM e"
                ),
                {"type": entity_type, "memory": created.json()["id"]},
            )
    headers = {"X-API-Key": API_KEY, "X-Cognis-User": user_id}
    async with http_session(api.url, headers) as mcp:
        both = await mcp.call_tool("list_entities", {"name": "paris"})
        place = payload(await mcp.call_tool("list_entities", {"name": "paris", "type": "place"}))
    assert "'paris' names 2 entities" in error_text(both)
    assert "Paris (place)" in error_text(both) and "Paris (person)" in error_text(both)
    assert place["entity"] == {"name": "Paris", "type": "place", "memories": 1}
    assert [m["content"] for m in place["memories"]] == [content]


async def test_the_connection_names_the_agent_and_the_run(
    api: ApiProcess, client: httpx.AsyncClient, user_id: str
) -> None:
    """Writes belong to the agent and run the connection names (HTTP headers, or the stdio
    server's settings), whatever the arguments say; reads see that agent's memories and the
    shared ones, never another agent's. A connection naming none sees them all."""
    headers = {"X-API-Key": API_KEY, "X-Cognis-User": user_id}
    planner_headers = {**headers, "X-Cognis-Agent": "planner", "X-Cognis-Run": "r1"}
    async with http_session(api.url, planner_headers) as mcp:
        # An agent id in the arguments is not the model's to choose: ignored.
        trains = {"content": "Noor books trains for trips.", "agent_id": "coach", **FULL}
        planner = payload(await mcp.call_tool("add_memory", trains))
    assert (planner["agent_id"], planner["run_id"]) == ("planner", "r1")
    async with http_session(api.url, headers) as mcp:
        shared = payload(
            await mcp.call_tool("add_memory", {"content": "Noor trains for a marathon.", **FULL})
        )
    assert (shared["agent_id"], shared["run_id"]) == (None, None)
    async with http_session(api.url, {**headers, "X-Cognis-Agent": "coach"}) as mcp:
        job = payload(
            await mcp.call_tool(
                "add_messages",
                {"messages": [{"content": "I train with a running club."}], **FULL},
            )
        )
        (decision,) = [d for m in job["messages"] for d in m["decisions"]]
        assert decision["operation"] == "ADD", decision
        found = payload(await mcp.call_tool("search_memories", {"query": "Noor trains", **FULL}))
    club = (await client.get(f"/v1/users/{user_id}/memories/{decision['memory_id']}")).json()
    assert (club["agent_id"], club["run_id"]) == ("coach", None)
    ids = {r["memory"]["id"] for r in found["results"]}
    assert shared["id"] in ids and club["id"] in ids and planner["id"] not in ids

    # Over stdio the server's settings name them.
    async with stdio_session(
        api, user_id, COGNIS_MCP_AGENT_ID="planner", COGNIS_MCP_RUN_ID="r1"
    ) as mcp:
        listed = payload(await mcp.call_tool("list_memories", FULL))
        added = payload(
            await mcp.call_tool("add_memory", {"content": "Noor flies rarely.", **FULL})
        )
    assert {m["id"] for m in listed["items"]} == {planner["id"], shared["id"]}
    stored = (await client.get(f"/v1/users/{user_id}/memories/{added['id']}")).json()
    assert (stored["agent_id"], stored["run_id"]) == ("planner", "r1")
    async with http_session(api.url, headers) as mcp:
        everything = payload(await mcp.call_tool("list_memories", {}))
    assert {m["id"] for m in everything["items"]} == {
        m["id"].replace("-", "")[:8] for m in (planner, shared, club, stored)
    }


async def test_a_memory_kept_for_one_conversation(
    api: ApiProcess, client: httpx.AsyncClient, user_id: str
) -> None:
    """add_memory with a session_id keeps it for that conversation only: a search sees it when
    it names the session, a filter on scope or session lists it."""
    headers = {"X-API-Key": API_KEY, "X-Cognis-User": user_id}
    async with http_session(api.url, headers) as mcp:
        aside = payload(
            await mcp.call_tool(
                "add_memory", {"content": "Noor's train leaves at 9.", "session_id": "s1", **FULL}
            )
        )
        lasting = payload(await mcp.call_tool("add_memory", {"content": "Noor likes trains."}))
        query = {"query": "When does Noor's train leave?"}
        outside = payload(await mcp.call_tool("search_memories", query))
        inside = payload(await mcp.call_tool("search_memories", {**query, "session_id": "s1"}))
        in_context = {"field": "scope", "op": "eq", "value": "CONTEXT"}
        listed = payload(await mcp.call_tool("list_memories", {"filters": in_context}))
        of_s1 = {"field": "session", "op": "eq", "value": "s1"}
        listed_s1 = payload(await mcp.call_tool("list_memories", {"filters": of_s1}))
        bad = await mcp.call_tool(
            "list_memories", {"filters": {"field": "scope", "op": "like", "value": "USER"}}
        )
    stored = (await client.get(f"/v1/users/{user_id}/memories/{aside['id']}")).json()
    assert (stored["scope"], stored["session_id"]) == ("CONTEXT", "s1")
    short = aside["id"][:8]
    # Without the session, the conversation's memory is not searched; with it, it is found.
    assert short not in {r["id"] for r in outside["results"]}
    assert short in {r["id"] for r in inside["results"]}
    assert lasting["id"] != short
    assert [m["id"] for m in listed["items"]] == [m["id"] for m in listed_s1["items"]] == [short]
    assert "Fix the argument" in error_text(bad) and "like" in error_text(bad)


async def test_results_are_compact_unless_asked_in_full(api: ApiProcess, user_id: str) -> None:
    """By default a memory is its short id, content, category and event time (and a search
    hit its relevance); full=true is the stored row. Either is JSON text without indentation,
    once (no structured copy)."""
    headers = {"X-API-Key": API_KEY, "X-Cognis-User": user_id}
    async with http_session(api.url, headers) as mcp:
        added = payload(
            await mcp.call_tool(
                "add_memory",
                {
                    "content": "Noor swims every Sunday morning.",
                    "category": "personal_details",
                    "event_time": "2026-11-01T09:00:00+00:00",
                },
            )
        )
        assert set(added) == {"id", "content", "category", "event_time"}
        assert re.fullmatch("[0-9a-f]{8}", added["id"])
        query = {"query": "When does Noor swim?", "top_k": 3}
        answer = await mcp.call_tool("search_memories", query)
        assert answer.structuredContent is None
        (text_content,) = answer.content
        compact = payload(answer)
        unindented = json.dumps(compact, ensure_ascii=False, separators=(",", ":"))
        assert text_content.text == unindented  # type: ignore[union-attr]
        full = payload(await mcp.call_tool("search_memories", {**query, **FULL}))
        (hit,) = compact["results"]
        (row,) = full["results"]
        # `event_at` only where the date the content names differs from `event_time` ("every
        # Sunday" names one), and then the one the full result states.
        assert set(hit) - {"event_at"} == {"id", "content", "category", "event_time", "relevance"}
        if "event_at" in hit:
            stated = datetime.fromisoformat(hit["event_at"])
            assert stated == datetime.fromisoformat(row["event_at"])
            assert stated != datetime.fromisoformat(row["memory"]["event_time"])
        assert hit["id"] == row["memory"]["id"].replace("-", "")[:8]
        assert hit["relevance"] == round(row["relevance"], 3)
        # The point of it: a fraction of the characters in an agent's context.
        assert len(json.dumps(hit)) * 3 < len(json.dumps(row))
        listed = payload(await mcp.call_tool("list_memories", {}))
        assert listed == {"items": [added]}
        job = payload(
            await mcp.call_tool(
                "add_messages", {"messages": [{"content": "I also cycle to work."}]}
            )
        )
        assert job["state"] == "done" and set(job) == {"job_id", "state", "decisions"}
        (decision,) = job["decisions"]
        assert decision["operation"] == "ADD" and re.fullmatch("[0-9a-f]{8}", decision["id"])


async def _give_id(db: AsyncEngine, memory_id: str, new_id: str) -> None:
    """Renumber a memory of one version (as if uuid4 had drawn `new_id`)."""
    async with db.begin() as connection:
        moved = await connection.execute(
            text("UPDATE memories SET id = :new, chain_id = :new WHERE id = :old"),
            {"new": new_id, "old": memory_id},
        )
    assert moved.rowcount == 1


async def test_a_short_id_names_one_memory_of_this_user_only(
    api: ApiProcess, client: httpx.AsyncClient, db: AsyncEngine, user_id: str, other_user_id: str
) -> None:
    async def add(user: str, content: str) -> str:
        created = await client.post(f"/v1/users/{user}/memories", json={"content": content})
        assert created.status_code == 201, created.text
        return str(created.json()["id"])

    swims = await add(user_id, "Noor swims on Sundays.")
    cycles = await add(user_id, "Noor cycles to work.")
    theirs = await add(other_user_id, "Omar hides a spare key.")
    # Another user's memory whose id starts like one of ours: never found through ours.
    await _give_id(db, theirs, swims[:8] + theirs[8:])
    headers = {"X-API-Key": API_KEY, "X-Cognis-User": user_id}
    async with http_session(api.url, headers) as mcp:
        got = payload(await mcp.call_tool("get_memory", {"memory_id": swims[:8]}))
        assert got["memory"]["content"] == "Noor swims on Sundays."
        other_view = await mcp.call_tool("get_memory", {"memory_id": cycles[:8]})
        assert payload(other_view)["memory"]["content"] == "Noor cycles to work."

        # Two of ours sharing the short id: refused, with both full ids to choose from.
        await _give_id(db, cycles, swims[:8] + cycles[8:])
        ambiguous = await mcp.call_tool("get_memory", {"memory_id": swims[:8]})
        assert swims in error_text(ambiguous) and swims[:8] + cycles[8:] in error_text(ambiguous)
        assert theirs[8:] not in error_text(ambiguous)
        # More digits (dashes allowed) name one again; writes take short ids too.
        updated = payload(
            await mcp.call_tool(
                "update_memory",
                {"memory_id": swims[:13], "content": "Noor swims on Saturdays.", **FULL},
            )
        )
        assert (updated["id"], updated["replaces_id"]) == (swims, swims)
        # A version's short id names its memory too (the memory's own is still ambiguous).
        version = updated["version_id"][:8]
        ended = payload(await mcp.call_tool("delete_memory", {"memory_id": version}))
        assert ended == {
            "id": swims.replace("-", "")[:8],
            "content": "Noor swims on Saturdays.",
            "category": updated["category"],
            "current": False,
        }

        unknown = await mcp.call_tool("get_memory", {"memory_id": "0000ffff"})
        assert "no memory has an id starting with '0000ffff'" in error_text(unknown)
        not_hex = await mcp.call_tool("delete_memory", {"memory_id": "Noor's"})
        assert "is not a memory id" in error_text(not_hex)
    # Theirs is untouched.
    untouched = await client.get(f"/v1/users/{other_user_id}/memories")
    assert [m["content"] for m in untouched.json()["items"]] == ["Omar hides a spare key."]


async def test_a_timeout_says_the_write_may_have_happened_and_how_to_retry_it(
    api: ApiProcess, client: httpx.AsyncClient, user_id: str
) -> None:
    key = f"timeout-{user_id}"
    write = {"content": "Noor sings alto.", "idempotency_key": key}
    # Every attempt reaches the service and none of its answers comes back: each times out.
    async with (
        answers_withheld(api) as silent_url,
        stdio_session(
            api, user_id, COGNIS_MCP_API_URL=silent_url, COGNIS_MCP_TIMEOUT_S="0.5"
        ) as mcp,
    ):
        lost = await mcp.call_tool("add_memory", write)
        unread = await mcp.call_tool("list_memories", {})
    text = error_text(lost)
    assert "no answer from the memory service" in text and "Timeout" in text
    assert "may or may not have happened" in text and f"idempotency_key={key!r}" in text
    assert "nothing was changed by this call" in error_text(unread)
    # The retry the text advises: done once, whatever the lost attempts did.
    async with stdio_session(api, user_id) as mcp:
        again = payload(await mcp.call_tool("add_memory", {**write, **FULL}))
        twice = payload(await mcp.call_tool("add_memory", {**write, **FULL}))
    assert twice["id"] == again["id"]
    listed = (await client.get(f"/v1/users/{user_id}/memories")).json()["items"]
    assert [m["id"] for m in listed] == [again["id"]]
