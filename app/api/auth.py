"""The API's key guards: a request is bound to the tenant of the key it presents
(app.tenants.authentication decides which), and the admin and metrics keys are checked here."""

from __future__ import annotations

from litestar.connection import ASGIConnection
from litestar.exceptions import NotAuthorizedException
from litestar.handlers.base import BaseRouteHandler

from app.db.tenant import act_as
from app.in_process import RATE_COUNTED
from app.tenants.authentication import API_KEY_HEADER, matches_any, presented_key


async def require_api_key(connection: ASGIConnection, _: BaseRouteHandler) -> None:
    # A request starts bound to no tenant, whatever the task ran before (an in-process client
    # sends every request from one task).
    act_as(None)
    key = presented_key(connection.headers)
    keys = connection.app.state.runtime.keys
    # A call made in process for a request that was counted (an MCP tool's) is not again.
    count = not connection.scope.get(RATE_COUNTED)  # type: ignore[call-overload]
    tenant_id = await keys.tenant_of(key, count=count) if key else None
    if tenant_id is None:
        raise NotAuthorizedException(
            f"missing or invalid API key: send it in the {API_KEY_HEADER} header "
            "(or as Authorization: Bearer <key>)"
        )
    act_as(tenant_id)


def require_admin_key(connection: ASGIConnection, _: BaseRouteHandler) -> None:
    hashes = connection.app.state.runtime.settings.keys.admin_key_hash_list
    if not hashes:
        raise NotAuthorizedException(
            "the admin API is off: set COGNIS_ADMIN_KEY_HASHES to the SHA-256 of an admin key"
        )
    _require_one_of(connection, hashes, "admin key")


def require_metrics_key(connection: ASGIConnection, _: BaseRouteHandler) -> None:
    """/metrics is open unless COGNIS_METRICS_KEY_HASHES names the keys that may read it."""
    hashes = connection.app.state.runtime.settings.keys.metrics_key_hash_list
    if hashes:
        _require_one_of(connection, hashes, "metrics key")


def _require_one_of(connection: ASGIConnection, hashes: tuple[str, ...], what: str) -> None:
    key = presented_key(connection.headers)
    if not key or not matches_any(key, hashes):
        raise NotAuthorizedException(
            f"missing or invalid {what}: send it in the {API_KEY_HEADER} header"
        )
