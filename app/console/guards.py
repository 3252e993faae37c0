"""Who may see a console page and post its forms: the session's key (kept server-side), the
CSRF token every change carries, and what a refusal or an API error shows."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cognis_client import AsyncCognisClient, CognisError
from litestar import Request, Response
from litestar.connection import ASGIConnection
from litestar.exceptions import (
    NotAuthorizedException,
    PermissionDeniedException,
)
from litestar.handlers.base import BaseRouteHandler
from litestar.response import Redirect

from app.console import csrf, sessions
from app.console.responses import COOKIE, page
from app.db.tenant import act_as
from app.in_process import in_process_client
from app.tenants.authentication import API_KEY_HEADER


async def _form(connection: ASGIConnection) -> dict[str, Any]:
    """The posted form (parsed once: the handler's `data` reads the same parse)."""
    return dict(await connection.form()) if isinstance(connection, Request) else {}


async def require_form_token(connection: ASGIConnection, _: BaseRouteHandler) -> None:
    """Every change: the form carries the token of this session's cookie, or nothing happens."""
    secret = connection.cookies.get(COOKIE)
    given = (await _form(connection)).get(csrf.FIELD)
    if not csrf.accepted(given, csrf.session_token(secret) if secret else None):
        raise PermissionDeniedException(csrf.REFUSED)


async def require_console_key(connection: ASGIConnection, _: BaseRouteHandler) -> None:
    """The session's key (kept server-side) and its tenant, which binds the page's queries, as
    the API's key check does; no session, an expired one, or a key revoked since: log in."""
    act_as(None)
    runtime = connection.app.state.runtime
    secret = connection.cookies.get(COOKIE)
    key = await sessions.session_key(runtime.sessionmaker, secret) if secret else None
    tenant_id = await runtime.keys.tenant_of(key) if key else None
    if key is None or tenant_id is None:
        raise NotAuthorizedException("log in with an API key")
    connection.state.console_key = key
    act_as(tenant_id)


def to_login(_: Request, __: NotAuthorizedException) -> Response[Any]:
    return Redirect("/console/login")


def on_api_error(request: Request, exc: CognisError) -> Response[str]:
    return page(request, "error.html", exc.status, error=exc, path=request.url.path)


def on_refused(request: Request, exc: PermissionDeniedException) -> Response[str]:
    error = CognisError(403, "Form refused", exc.detail, {})
    return page(request, "error.html", 403, error=error, path=request.url.path)


@dataclass
class _Api:
    client: AsyncCognisClient

    async def __aenter__(self) -> AsyncCognisClient:
        return self.client

    async def __aexit__(self, *exc: object) -> None:
        await self.client.close()


def api(request: Request) -> _Api:
    """The public API, in process, with the logged-in key (found by require_console_key)."""
    return _Api(in_process_client(request.app, {API_KEY_HEADER: request.state.console_key}))
