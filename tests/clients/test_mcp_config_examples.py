"""docs/clients.md's two MCP client configurations, used as an MCP client uses them: the stdio
one's command started with its env, the HTTP one's URL called with its headers. Only this
checkout's path, the API's URL, the key and the user are swapped for the test's."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from tests.conftest import API_KEY, ROOT, ApiProcess
from tests.doc_blocks import one_run_by

PAGE = "docs/clients.md"


def configuration(contains: str, api: ApiProcess, user: str) -> dict[str, Any]:
    text = one_run_by(__file__, PAGE, contains)
    text = text.replace("/path/to/cognis-memory", str(ROOT)).replace("cognis-dev-key", API_KEY)
    text = text.replace("http://127.0.0.1:8000", api.url).replace('"alice"', json.dumps(user))
    return json.loads(text)["mcpServers"]["cognis-memory"]


async def remembered(session: ClientSession, fact: str) -> None:
    await session.initialize()
    added = await session.call_tool("add_memory", {"content": fact})
    assert not added.isError, added.content


async def contents(api: ApiProcess, user: str) -> list[str]:
    async with api.client() as http:
        listed = await http.get(f"/v1/users/{user}/memories")
    assert listed.status_code == 200, listed.text
    return [memory["content"] for memory in listed.json()["items"]]


async def test_the_stdio_configuration_starts_a_server_for_its_user(api: ApiProcess) -> None:
    user = f"alice-{uuid.uuid4().hex[:8]}"
    server = configuration('"command"', api, user)
    env = {**server["env"], "PATH": "/usr/bin:/bin", "PYTHONPATH": f"{ROOT}:{ROOT}/clients/python"}
    params = StdioServerParameters(command=server["command"], env=env, cwd=str(ROOT))
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await remembered(session, "I keep bees on the roof.")
    assert await contents(api, user) == ["I keep bees on the roof."]


async def test_the_http_configuration_reaches_the_api_as_its_user(api: ApiProcess) -> None:
    user = f"alice-{uuid.uuid4().hex[:8]}"
    server = configuration('"type": "http"', api, user)
    assert server["type"] == "http"
    async with (
        httpx.AsyncClient(headers=server["headers"], timeout=120) as http,
        streamable_http_client(server["url"], http_client=http) as (read, write, _),
        ClientSession(read, write) as session,
    ):
        await remembered(session, "I play the cello.")
    assert await contents(api, user) == ["I play the cello."]
