"""The MCP endpoint inside the API process: POST/GET/DELETE /mcp, behind the guards the
composition gives it (the API's key check: app/asgi.py).

Stateless streamable HTTP (JSON answers), so any API replica behind a load balancer can answer
any call. Tool calls go through the API's own routes in process (no network hop), carrying the
caller's key headers, so the API checks the key a second time and applies its usual rules.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import AsyncIterator, Callable
from typing import Any

from litestar import Litestar, asgi
from litestar.connection import ASGIConnection
from litestar.exceptions import NotAuthorizedException
from litestar.handlers import ASGIRouteHandler, BaseRouteHandler
from litestar.types import Guard, Receive, Scope, Send

from app.mcp_server.body_check import refuse_unparsable
from app.mcp_server.identity import McpSettings
from app.mcp_server.tools import build_server

MCP_PATH = "/mcp"


MCP_KEY_HINT = (
    "; an MCP client sends it from its configuration, with the user, e.g. "
    '"headers": {"X-API-Key": "<key>", "X-Cognis-User": "<user id>"}'
)


def _with_mcp_hint(guard: Guard) -> Guard:
    """`guard`, its 401 saying where an MCP client's configuration puts the key."""

    async def guarded(connection: ASGIConnection, handler: BaseRouteHandler) -> None:
        try:
            checked = guard(connection, handler)
            if inspect.isawaitable(checked):
                await checked
        except NotAuthorizedException as exc:
            raise NotAuthorizedException(f"{exc.detail}{MCP_KEY_HINT}") from exc

    return guarded


def mcp_endpoint(guards: list[Guard]) -> tuple[ASGIRouteHandler, Callable[[Litestar], Any]]:
    """The route handler to mount behind `guards`, and the lifespan that runs its session
    manager."""
    server = build_server(McpSettings(), http_path=MCP_PATH)
    server.streamable_http_app()  # creates the session manager
    manager = server.session_manager

    @asgi(MCP_PATH, guards=[_with_mcp_hint(g) for g in guards], include_in_schema=False)
    async def mcp(scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("method") == "POST":
            checked = await refuse_unparsable(scope, receive, send)
            if checked is None:
                return
            receive = checked
        await manager.handle_request({**scope, "cognis_mcp_in_process": True}, receive, send)  # type: ignore[arg-type]

    @contextlib.asynccontextmanager
    async def lifespan(_: Litestar) -> AsyncIterator[None]:
        async with manager.run():
            yield

    return mcp, lifespan
