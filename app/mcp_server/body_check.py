"""A POST to /mcp whose body is not JSON answers JSON-RPC's parse error (-32700) with 400, as
the protocol says. The MCP SDK catches only json.JSONDecodeError: a body that is not UTF-8, or
nested deeper than the parser recurses (a few thousand brackets), escaped as a 500. The body is
parsed here first, then handed on unchanged."""

from __future__ import annotations

import json

from litestar.response.base import ASGIResponse
from litestar.types import Receive, ReceiveMessage, Scope, Send

PARSE_ERROR = -32700


def parse_error(body: bytes) -> str | None:
    """Why `body` is not a JSON document, or None when it is one."""
    try:
        json.loads(body)
    except RecursionError:
        return "Parse error: the document is nested too deeply"
    except ValueError as exc:  # JSONDecodeError, and UnicodeDecodeError for non-UTF-8 bytes
        return f"Parse error: {exc}"[:300]
    return None


async def read_body(receive: Receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def replaying(body: bytes, receive: Receive) -> Receive:
    """A receive that gives `body` once, in one message, then what the client sends next (its
    disconnect)."""
    given = False

    async def replay() -> ReceiveMessage:
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


async def refuse_unparsable(scope: Scope, receive: Receive, send: Send) -> Receive | None:
    """For a POST: None once the parse error has been answered, else a receive that replays
    the body read to check it."""
    body = await read_body(receive)
    why = parse_error(body)
    if why is None:
        return replaying(body, receive)
    answer = json.dumps(
        {"jsonrpc": "2.0", "id": None, "error": {"code": PARSE_ERROR, "message": why}}
    ).encode()
    response = ASGIResponse(body=answer, status_code=400, media_type="application/json")
    await response(scope, receive, send)
    return None
