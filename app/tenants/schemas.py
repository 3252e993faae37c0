"""Wire schemas of tenants and their keys: the admin API's bodies and answers, and the JSON
that `python -m app admin` prints (the same structs)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated
from uuid import UUID

import msgspec

from app.tenants.models import ApiKey, Tenant

Name = Annotated[str, msgspec.Meta(min_length=1, max_length=200, pattern=r"^[^\x00]*$")]


class TenantCreate(msgspec.Struct, forbid_unknown_fields=True):
    name: Name


class TenantOut(msgspec.Struct):
    id: UUID
    name: str
    created_at: datetime

    @classmethod
    def of(cls, tenant: Tenant) -> TenantOut:
        return cls(id=tenant.id, name=tenant.name, created_at=tenant.created_at)


class TenantList(msgspec.Struct):
    items: list[TenantOut]


class KeyCreate(msgspec.Struct, forbid_unknown_fields=True):
    name: Name | None = None


class KeyRotate(msgspec.Struct, forbid_unknown_fields=True):
    # How long the old key keeps working; 0: revoked at once.
    grace_s: Annotated[int, msgspec.Meta(ge=0, le=2_592_000)] = 0


class KeyOut(msgspec.Struct):
    """A key as listed: its public prefix, never its secret."""

    prefix: str
    tenant_id: UUID
    name: str | None
    created_at: datetime
    last_used_at: datetime | None
    expires_at: datetime | None
    revoked_at: datetime | None

    @classmethod
    def of(cls, key: ApiKey) -> KeyOut:
        return cls(
            prefix=key.prefix,
            tenant_id=key.tenant_id,
            name=key.name,
            created_at=key.created_at,
            last_used_at=key.last_used_at,
            expires_at=key.expires_at,
            revoked_at=key.revoked_at,
        )


class IssuedKeyOut(msgspec.Struct):
    """A new key: `key` is shown here once and stored nowhere (only its SHA-256 is)."""

    key: str
    details: KeyOut
    replaces: KeyOut | None = None


class KeyList(msgspec.Struct):
    items: list[KeyOut]
