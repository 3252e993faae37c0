"""An API client that calls this very process's routes (no network hop): the MCP endpoint and the
web console use the public API through it, so its key check, validation and isolation apply.
It lives below the web layer: the API's siblings reach the API without importing it."""

from __future__ import annotations

from typing import Any

import httpx
from cognis_client import AsyncCognisClient

IN_PROCESS_URL = "http://cognis.in-process"


def in_process_client(
    app: Any, headers: dict[str, str], timeout_s: float = 60.0
) -> AsyncCognisClient:
    """`app`: the running Litestar application (an ASGI callable)."""
    client = AsyncCognisClient(
        IN_PROCESS_URL, timeout_s=timeout_s, transport=httpx.ASGITransport(app=app)
    )
    client.http.headers.update(headers)
    return client
