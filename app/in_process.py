"""An API client that calls this very process's routes (no network hop): the MCP endpoint and the
web console use the public API through it, so its key check, validation and isolation apply.
It lives below the web layer: the API's siblings reach the API without importing it."""

from __future__ import annotations

from typing import Any

import httpx
from cognis_client import AsyncCognisClient

IN_PROCESS_URL = "http://cognis.in-process"
# An ASGI scope key only code in this process can set (no header can): the request's key was
# counted against its rate by the request that makes this call (one MCP call, one token).
RATE_COUNTED = "cognis.rate_counted"


def in_process_client(
    app: Any, headers: dict[str, str], timeout_s: float = 60.0, *, counted: bool = False
) -> AsyncCognisClient:
    """`app`: the running Litestar application (an ASGI callable). `counted`: the caller's own
    request has already spent the key's rate-limit token, so these calls spend none."""

    async def already_counted(scope: Any, receive: Any, send: Any) -> None:
        await app({**scope, RATE_COUNTED: True}, receive, send)

    client = AsyncCognisClient(
        IN_PROCESS_URL,
        timeout_s=timeout_s,
        transport=httpx.ASGITransport(app=already_counted if counted else app),
    )
    client.http.headers.update(headers)
    return client
