"""A POST to /mcp whose body is not JSON gets JSON-RPC's parse error with 400, never a 500
(issue 54): broken JSON, bytes that are not UTF-8, and nesting deeper than a parser recurses.
A well-formed call still reaches the MCP server after the body was read to check it."""

from __future__ import annotations

import httpx
import pytest

from app import __version__
from tests.mcp_server.helpers import INITIALIZE

ACCEPT = {"Accept": "application/json, text/event-stream", "content-type": "application/json"}


@pytest.mark.parametrize(
    "body",
    [b'{"jsonrpc": "2.0", "id": 1, "method":', b"\xff\xfe{}", b"[" * 5000 + b"]" * 5000],
    ids=["truncated", "not-utf8", "5000-deep"],
)
async def test_a_body_that_is_not_json_is_a_parse_error(
    client: httpx.AsyncClient, body: bytes
) -> None:
    answer = await client.post("/mcp", content=body, headers={**ACCEPT, "X-Cognis-User": "u"})
    assert answer.status_code == 400, answer.text
    error = answer.json()
    assert error["jsonrpc"] == "2.0" and error["id"] is None
    assert error["error"]["code"] == -32700
    assert error["error"]["message"].startswith("Parse error")


async def test_a_well_formed_call_still_reaches_the_server(client: httpx.AsyncClient) -> None:
    answer = await client.post("/mcp", json=INITIALIZE, headers={**ACCEPT, "X-Cognis-User": "u"})
    assert answer.status_code == 200, answer.text
    assert answer.json()["result"]["serverInfo"]["version"] == __version__
