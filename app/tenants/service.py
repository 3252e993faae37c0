"""Tenants and their API keys: created, listed, rotated, revoked (the admin CLI and API, as the
worker role with no tenant set: row-level security lets only cognis_background see every
tenant's rows, 0042), and the look-up behind every request's key check (the request role,
through functions that answer for one key). Never commits: callers own the transaction."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import func, select, text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from app.errors import ConflictError, InvalidInputError, NotFoundError
from app.tenants.keys import generate_key, hash_key
from app.tenants.models import ApiKey, Tenant

MAX_NAME_CHARS = 200


@dataclass(frozen=True, slots=True)
class IssuedKey:
    """A key as created: the plaintext is in the answer once and nowhere else."""

    key: ApiKey
    plaintext: str


@dataclass(frozen=True, slots=True)
class KeyOwner:
    key_id: uuid.UUID
    prefix: str
    tenant_id: uuid.UUID
    last_used_at: datetime | None
    key: str = field(repr=False)  # the key presented, for record_use


def _name(name: str | None, field: str, required: bool) -> str | None:
    if name is None or not name.strip():
        if required:
            raise InvalidInputError(f"{field} must not be empty", field=field)
        return None
    if len(name) > MAX_NAME_CHARS or "\x00" in name:
        raise InvalidInputError(
            f"{field} must be at most {MAX_NAME_CHARS} characters, without NUL", field=field
        )
    return name.strip()


class TenantAdmin:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def create_tenant(self, name: str) -> Tenant:
        tenant = Tenant(id=uuid.uuid4(), name=_name(name, "name", required=True))
        try:
            async with self.session.begin_nested():
                self.session.add(tenant)
        except IntegrityError as exc:
            raise ConflictError(f"a tenant named {name!r} exists already") from exc
        return tenant

    async def list_tenants(self) -> list[Tenant]:
        return list(await self.session.scalars(select(Tenant).order_by(Tenant.created_at)))

    async def tenant(self, ref: str) -> Tenant:
        """A tenant by id or by name."""
        try:
            found = await self.session.get(Tenant, uuid.UUID(ref))
        except ValueError:
            found = await self.session.scalar(select(Tenant).where(Tenant.name == ref))
        if found is None:
            raise NotFoundError(f"no tenant {ref[:64]!r}")
        return found

    async def create_key(self, tenant_id: uuid.UUID, name: str | None = None) -> IssuedKey:
        new = generate_key()
        key = ApiKey(
            id=uuid.uuid4(),
            tenant_id=tenant_id,
            prefix=new.prefix,
            key_hash=new.key_hash,
            name=_name(name, "name", required=False),
        )
        self.session.add(key)
        await self.session.flush()
        return IssuedKey(key=key, plaintext=new.plaintext)

    async def list_keys(self, tenant_id: uuid.UUID | None = None) -> list[ApiKey]:
        query = select(ApiKey).order_by(ApiKey.created_at)
        if tenant_id is not None:
            query = query.where(ApiKey.tenant_id == tenant_id)
        return list(await self.session.scalars(query))

    async def _live_key(self, prefix: str) -> ApiKey:
        key = await self.session.scalar(
            select(ApiKey).where(ApiKey.prefix == prefix).with_for_update()
        )
        if key is None or key.revoked_at is not None:
            raise NotFoundError(f"no live key with prefix {prefix[:64]!r}")
        return key

    async def revoke_key(self, prefix: str) -> ApiKey:
        key = await self._live_key(prefix)
        key.revoked_at = await self.session.scalar(select(func.now()))
        await self.session.flush()
        return key

    async def rotate_key(self, prefix: str, grace_s: int = 0) -> tuple[ApiKey, IssuedKey]:
        """A new key for the same tenant; the old one stops working after `grace_s` seconds
        (at once for 0), so clients can switch without an outage."""
        if not 0 <= grace_s <= 30 * 86400:
            raise InvalidInputError("grace_s must be between 0 and 2592000", field="grace_s")
        old = await self._live_key(prefix)
        now = await self.session.scalar(select(func.now()))
        assert now is not None
        if grace_s == 0:
            old.revoked_at = now
        else:
            ends = now + timedelta(seconds=grace_s)
            old.expires_at = min(old.expires_at, ends) if old.expires_at else ends
        issued = await self.create_key(old.tenant_id, old.name)
        return old, issued


# The request role reads no api_keys row itself (row-level security, 0042): these functions
# answer for the one key presented, comparing its hash in the database.
_KEY_OWNER = text(
    "SELECT key_id, tenant_id, last_used_at FROM cognis_key_owner(:prefix, :key_sha256)"
)
_KEY_USED = text("SELECT cognis_key_used(:prefix, :key_sha256)")


async def key_owner(session: AsyncSession, prefix: str, key: str) -> KeyOwner | None:
    """The tenant of a live key, or None: unknown, wrong secret, revoked or expired."""
    found = await session.execute(_KEY_OWNER, {"prefix": prefix, "key_sha256": hash_key(key)})
    row = found.first()
    if row is None:
        return None
    return KeyOwner(row.key_id, prefix, row.tenant_id, row.last_used_at, key)


async def record_use(session: AsyncSession, owner: KeyOwner) -> None:
    await session.execute(_KEY_USED, {"prefix": owner.prefix, "key_sha256": hash_key(owner.key)})
