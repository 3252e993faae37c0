"""Plain functions the tenant tests share: tenants and keys made through the admin API."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import httpx

from tests.conftest import InProcessApi


@dataclass(frozen=True)
class TenantKey:
    tenant_id: str
    name: str
    key: str
    prefix: str


async def new_tenant(admin: httpx.AsyncClient, label: str) -> TenantKey:
    name = f"{label}-{uuid.uuid4().hex[:8]}"
    created = await admin.post("/admin/v1/tenants", json={"name": name})
    assert created.status_code == 201, created.text
    tenant_id = created.json()["id"]
    issued = await admin.post(f"/admin/v1/tenants/{name}/keys", json={"name": "primary"})
    assert issued.status_code == 201, issued.text
    body = issued.json()
    assert body["details"]["tenant_id"] == tenant_id
    return TenantKey(tenant_id, name, body["key"], body["details"]["prefix"])


def tenant_client(api: InProcessApi, key: str) -> httpx.AsyncClient:
    return api.client({"X-API-Key": key})
