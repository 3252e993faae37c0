"""Admin API (/admin/v1): tenants and their API keys, behind the admin key."""

from __future__ import annotations

from collections.abc import AsyncIterator

from litestar import Controller, delete, get, post
from litestar.datastructures import State
from litestar.di import Provide

from app.api.contract import COMMON, WITH_BODY, problems
from app.db.tenant import tenant_scope
from app.runtime import Runtime
from app.tenants.schemas import (
    IssuedKeyOut,
    KeyCreate,
    KeyList,
    KeyOut,
    KeyRotate,
    TenantCreate,
    TenantList,
    TenantOut,
)
from app.tenants.service import TenantAdmin


async def provide_tenant_admin(state: State) -> AsyncIterator[TenantAdmin]:
    """Every tenant's rows, as the worker role with no tenant set: row-level security (0042)
    shows the request role its own tenant's row only. Committed before the answer is sent."""
    runtime: Runtime = state.runtime
    with tenant_scope(None):
        async with runtime.background_sessionmaker() as session, session.begin():
            yield TenantAdmin(session)


class TenantAdminController(Controller):
    path = "/admin/v1"
    tags = ["admin"]
    dependencies = {"admin": Provide(provide_tenant_admin)}

    @post("/tenants", summary="Create a tenant", responses=problems(*WITH_BODY, 409))
    async def create_tenant(self, data: TenantCreate, admin: TenantAdmin) -> TenantOut:
        return TenantOut.of(await admin.create_tenant(data.name))

    @get("/tenants", summary="List tenants", responses=problems(*COMMON))
    async def list_tenants(self, admin: TenantAdmin) -> TenantList:
        return TenantList(items=[TenantOut.of(t) for t in await admin.list_tenants()])

    @post(
        "/tenants/{tenant:str}/keys",
        summary="Create an API key of a tenant (id or name)",
        responses=problems(*WITH_BODY, 404),
    )
    async def create_key(self, tenant: str, data: KeyCreate, admin: TenantAdmin) -> IssuedKeyOut:
        issued = await admin.create_key((await admin.tenant(tenant)).id, data.name)
        return IssuedKeyOut(key=issued.plaintext, details=KeyOut.of(issued.key))

    @get(
        "/tenants/{tenant:str}/keys",
        summary="List a tenant's keys (prefixes, never secrets)",
        responses=problems(*COMMON, 404),
    )
    async def list_keys(self, tenant: str, admin: TenantAdmin) -> KeyList:
        keys = await admin.list_keys((await admin.tenant(tenant)).id)
        return KeyList(items=[KeyOut.of(k) for k in keys])

    @post(
        "/keys/{prefix:str}/rotate",
        summary="Replace a key; the old one ends after grace_s",
        responses=problems(*WITH_BODY, 404),
    )
    async def rotate_key(self, prefix: str, data: KeyRotate, admin: TenantAdmin) -> IssuedKeyOut:
        old, issued = await admin.rotate_key(prefix, data.grace_s)
        return IssuedKeyOut(
            key=issued.plaintext, details=KeyOut.of(issued.key), replaces=KeyOut.of(old)
        )

    @delete(
        "/keys/{prefix:str}",
        status_code=200,
        summary="Revoke a key at once",
        responses=problems(*COMMON, 404),
    )
    async def revoke_key(self, prefix: str, admin: TenantAdmin) -> KeyOut:
        return KeyOut.of(await admin.revoke_key(prefix))
