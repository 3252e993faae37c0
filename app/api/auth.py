"""API-key check, in one place: it finds the key's tenant and binds the request to it."""

from __future__ import annotations

import hashlib
import hmac
import uuid
from datetime import UTC, datetime, timedelta

from litestar.connection import ASGIConnection
from litestar.exceptions import NotAuthorizedException
from litestar.handlers.base import BaseRouteHandler

from app.config import DEV_API_KEY, Settings
from app.db.tenant import DEFAULT_TENANT_ID, act_as
from app.runtime import Runtime
from app.tenants.keys import key_prefix
from app.tenants.service import key_owner, record_use

API_KEY_HEADER = "X-API-Key"
# last_used_at is written at most this often per key: a write per request would cost more
# than the request.
LAST_USED_RESOLUTION = timedelta(minutes=1)


def hash_api_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def _matches_any(key: str, hashes: tuple[str, ...]) -> bool:
    digest = hash_api_key(key)
    # Compare against every hash so timing does not reveal which one matched.
    matches = [hmac.compare_digest(digest, h) for h in hashes]
    return any(matches)


def key_is_valid(key: str, settings: Settings) -> bool:
    """A key of the settings (COGNIS_API_KEY_HASHES, or the development key): default tenant."""
    if settings.dev_key_enabled:
        return hmac.compare_digest(key, DEV_API_KEY)
    return _matches_any(key, settings.api_key_hash_list)


def presented_key(connection: ASGIConnection) -> str | None:
    key = connection.headers.get(API_KEY_HEADER)
    if key is None:
        authorization = connection.headers.get("Authorization", "")
        if authorization.lower().startswith("bearer "):
            key = authorization[7:].strip()
    return key or None


async def tenant_of_key(key: str, runtime: Runtime) -> uuid.UUID | None:
    """The tenant a key belongs to (None: not a valid key); counts the use for rate limits."""
    prefix = key_prefix(key)
    if prefix is None:
        if not key_is_valid(key, runtime.settings):
            return None
        runtime.rate_limit(hash_api_key(key))
        return DEFAULT_TENANT_ID
    async with runtime.sessionmaker() as session:
        owner = await key_owner(session, prefix, key)
        if owner is None:
            return None
        runtime.rate_limit(prefix)
        now = datetime.now(UTC)
        if owner.last_used_at is None or now - owner.last_used_at >= LAST_USED_RESOLUTION:
            await record_use(session, owner.key_id)
            await session.commit()
    return owner.tenant_id


async def require_api_key(connection: ASGIConnection, _: BaseRouteHandler) -> None:
    # A request starts bound to no tenant, whatever the task ran before (an in-process client
    # sends every request from one task).
    act_as(None)
    key = presented_key(connection)
    tenant_id = await tenant_of_key(key, connection.app.state.runtime) if key else None
    if tenant_id is None:
        raise NotAuthorizedException(
            f"missing or invalid API key: send it in the {API_KEY_HEADER} header"
        )
    act_as(tenant_id)


def require_admin_key(connection: ASGIConnection, _: BaseRouteHandler) -> None:
    hashes = connection.app.state.runtime.settings.admin_key_hash_list
    if not hashes:
        raise NotAuthorizedException(
            "the admin API is off: set COGNIS_ADMIN_KEY_HASHES to the SHA-256 of an admin key"
        )
    _require_one_of(connection, hashes, "admin key")


def require_metrics_key(connection: ASGIConnection, _: BaseRouteHandler) -> None:
    """/metrics is open unless COGNIS_METRICS_KEY_HASHES names the keys that may read it."""
    hashes = connection.app.state.runtime.settings.metrics_key_hash_list
    if hashes:
        _require_one_of(connection, hashes, "metrics key")


def _require_one_of(connection: ASGIConnection, hashes: tuple[str, ...], what: str) -> None:
    key = presented_key(connection)
    if not key or not _matches_any(key, hashes):
        raise NotAuthorizedException(
            f"missing or invalid {what}: send it in the {API_KEY_HEADER} header"
        )
