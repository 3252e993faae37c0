"""API-key check, in one place (per-tenant keys will replace the settings list later)."""

from __future__ import annotations

import hashlib
import hmac

from litestar.connection import ASGIConnection
from litestar.exceptions import NotAuthorizedException
from litestar.handlers.base import BaseRouteHandler

from app.config import DEV_API_KEY, Settings

API_KEY_HEADER = "X-API-Key"


def hash_api_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def key_is_valid(key: str, settings: Settings) -> bool:
    if settings.dev_key_enabled:
        return hmac.compare_digest(key, DEV_API_KEY)
    digest = hash_api_key(key)
    # Compare against every hash so timing does not reveal which one matched.
    matches = [hmac.compare_digest(digest, h) for h in settings.api_key_hash_list]
    return any(matches)


def require_api_key(connection: ASGIConnection, _: BaseRouteHandler) -> None:
    settings: Settings = connection.app.state.runtime.settings
    key = connection.headers.get(API_KEY_HEADER)
    if key is None:
        authorization = connection.headers.get("Authorization", "")
        if authorization.lower().startswith("bearer "):
            key = authorization[7:].strip()
    if not key or not key_is_valid(key, settings):
        raise NotAuthorizedException(
            f"missing or invalid API key: send it in the {API_KEY_HEADER} header"
        )
