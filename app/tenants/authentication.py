"""Which tenant an API key acts for, in one place for every door that takes one: the API's key
guard, the console's login and MCP at /mcp all ask `KeyCheck.tenant_of`.

A key of the settings (COGNIS_API_KEY_HASHES, or the development key) acts for the default
tenant; a tenant's own key (`cgm_<prefix>_<secret>`) for its tenant, while it is live."""

from __future__ import annotations

import hmac
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.config import DEV_API_KEY, KeySettings
from app.db.tenant import DEFAULT_TENANT_ID
from app.tenants.keys import hash_key, key_prefix
from app.tenants.rate_limit import RateLimiter
from app.tenants.service import key_owner, record_use

API_KEY_HEADER = "X-API-Key"
# last_used_at is written at most this often per key: a write per request would cost more
# than the request.
LAST_USED_RESOLUTION = timedelta(minutes=1)


def presented_key(headers: Mapping[str, str]) -> str | None:
    """The key a request presents: its X-API-Key header, or `Authorization: Bearer <key>`
    (or `Token <key>`, as mem0's client sends it: docs/mem0.md)."""
    key = headers.get(API_KEY_HEADER)
    if key is None:
        scheme, _, credentials = headers.get("Authorization", "").partition(" ")
        if scheme.lower() in ("bearer", "token"):
            key = credentials.strip()
    return key or None


def matches_any(key: str, hashes: tuple[str, ...]) -> bool:
    """Whether the key's SHA-256 is one of `hashes`."""
    digest = hash_key(key)
    # Compare against every hash so timing does not reveal which one matched.
    matches = [hmac.compare_digest(digest, h) for h in hashes]
    return any(matches)


def key_is_valid(key: str, keys: KeySettings) -> bool:
    """A key of the settings (COGNIS_API_KEY_HASHES, or the development key): default tenant."""
    if keys.dev_key_enabled:
        return hmac.compare_digest(key, DEV_API_KEY)
    return matches_any(key, keys.api_key_hash_list)


@dataclass
class KeyCheck:
    keys: KeySettings
    sessionmaker: async_sessionmaker[AsyncSession]
    rate_limiter: RateLimiter | None = None

    async def tenant_of(self, key: str, *, count: bool = True) -> uuid.UUID | None:
        """The tenant a key belongs to (None: not a valid key); with `count`, counts the use
        against the key's rate (RateLimitedError, 429, when it is over it)."""
        prefix = key_prefix(key)
        if prefix is None:
            if not key_is_valid(key, self.keys):
                return None
            if count:
                self._count(hash_key(key))
            return DEFAULT_TENANT_ID
        # Its own short transaction, before and apart from the request's: a use counts even
        # when the request then fails.
        async with self.sessionmaker() as session, session.begin():
            owner = await key_owner(session, prefix, key)
            if owner is None:
                return None
            if count:
                self._count(prefix)
            now = datetime.now(UTC)
            if owner.last_used_at is None or now - owner.last_used_at >= LAST_USED_RESOLUTION:
                await record_use(session, owner)
        return owner.tenant_id

    def _count(self, key_id: str) -> None:
        if self.rate_limiter is not None:
            self.rate_limiter.check(key_id)
