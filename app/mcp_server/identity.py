"""Who an MCP tool call acts for, and the API client it acts through.

Over stdio the server's own settings name the user (and the agent and run, if any) and the key.
Over HTTP they may come from the connection's headers, which the MCP client's configuration sets;
the model only ever fills tool arguments, and no tool takes a user, agent or run id, so it cannot
reach another user's memories, and an agent's writes carry the agent its configuration names.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from cognis_client import AsyncCognisClient
from mcp.server.fastmcp import Context
from mcp.server.fastmcp.exceptions import ToolError
from pydantic import SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict
from starlette.requests import Request

from app.in_process import in_process_client
from app.tenants.authentication import API_KEY_HEADER

USER_HEADER = "X-Cognis-User"
# The agent and the run (task) the connection works for: writes belong to them; reads see their
# memories and the user's shared ones (docs/api.md, "Agents and runs"). Unset: the user's own.
AGENT_HEADER = "X-Cognis-Agent"
RUN_HEADER = "X-Cognis-Run"
# Headers an HTTP caller authenticates with; forwarded as they came to the API's own key check.
AUTH_HEADERS = (API_KEY_HEADER, "Authorization")


class McpSettings(BaseSettings):
    """COGNIS_MCP_*: where the API is, and (for stdio) whose memories the tools work on: the
    user's, and within them an agent's and a run's."""

    model_config = SettingsConfigDict(env_prefix="COGNIS_MCP_", extra="ignore")

    api_url: str = "http://127.0.0.1:8000"
    api_key: SecretStr | None = None
    user_id: str | None = None
    agent_id: str | None = None
    run_id: str | None = None
    timeout_s: float = 60.0


@dataclass(frozen=True)
class Caller:
    client: AsyncCognisClient
    user_id: str
    # What every call of the connection passes as agent_id and run_id (none when unset).
    scope: dict[str, Any]


def _http_request(ctx: Context) -> Request | None:
    request = ctx.request_context.request
    return request if isinstance(request, Request) else None


def _header(request: Request | None, name: str) -> str | None:
    return request.headers.get(name) if request is not None else None


@contextlib.asynccontextmanager
async def caller(ctx: Context, settings: McpSettings) -> AsyncIterator[Caller]:
    """The user and API client for one tool call; a served-in-process call stays in process."""
    request = _http_request(ctx)
    user_id = settings.user_id or _header(request, USER_HEADER)
    if not user_id:
        raise ToolError(
            "no user configured for this MCP server: set COGNIS_MCP_USER_ID (stdio) or send "
            f"the {USER_HEADER} header from the MCP client's configuration (HTTP)"
        )
    scope = {
        name: value
        for name, value in (
            ("agent_id", settings.agent_id or _header(request, AGENT_HEADER)),
            ("run_id", settings.run_id or _header(request, RUN_HEADER)),
        )
        if value
    }
    api_key = settings.api_key.get_secret_value() if settings.api_key else None
    headers = {API_KEY_HEADER: api_key} if api_key else {}
    if request is not None and api_key is None:
        headers = {name: request.headers[name] for name in AUTH_HEADERS if name in request.headers}
    if request is not None and request.scope.get("cognis_mcp_in_process"):
        # /mcp's own key check spent this call's token: the API calls it makes spend none.
        client = in_process_client(request.scope["app"], headers, settings.timeout_s, counted=True)
    else:
        client = AsyncCognisClient(settings.api_url, timeout_s=settings.timeout_s)
        client.http.headers.update(headers)
    async with client:
        yield Caller(client, user_id, scope)
