"""Tenants and keys through the admin API and the admin CLI: created, used, listed, rotated,
revoked; the admin API answers only to the admin key."""

from __future__ import annotations

import json
import uuid

import httpx

from tests.conftest import API_KEY, InProcessApi, run_cli_async, wait_until
from tests.tenants.helpers import new_tenant, tenant_client


async def _status(inprocess_api: InProcessApi, key: str) -> int:
    async with tenant_client(inprocess_api, key) as http:
        return (await http.get("/v1/users/someone/memories")).status_code


async def test_admin_api_needs_the_admin_key(
    inprocess_api: InProcessApi, admin: httpx.AsyncClient
) -> None:
    tenant = await new_tenant(admin, "guarded")
    for key in (None, API_KEY, tenant.key, "not-a-key"):
        headers = {"X-API-Key": key} if key else {}
        async with inprocess_api.client(headers) as http:
            response = await http.get("/admin/v1/tenants")
        assert response.status_code == 401, (key, response.text)
        assert response.headers["content-type"].startswith("application/problem+json")
    # ... and the admin key is no API key.
    async with tenant_client(inprocess_api, admin.headers["X-API-Key"]) as http:
        assert (await http.get("/v1/users/someone/memories")).status_code == 401
    names = [t["name"] for t in (await admin.get("/admin/v1/tenants")).json()["items"]]
    assert "default" in names and tenant.name in names
    again = await admin.post("/admin/v1/tenants", json={"name": tenant.name})
    assert again.status_code == 409, again.text
    missing = await admin.post(f"/admin/v1/tenants/{uuid.uuid4()}/keys", json={})
    assert missing.status_code == 404, missing.text


async def test_key_lifecycle(inprocess_api: InProcessApi, admin: httpx.AsyncClient) -> None:
    tenant = await new_tenant(admin, "lifecycle")
    assert await _status(inprocess_api, tenant.key) == 200
    # A key with the right prefix but a wrong secret is refused.
    assert await _status(inprocess_api, tenant.key[:-4] + "AAAA") == 401

    listed = (await admin.get(f"/admin/v1/tenants/{tenant.tenant_id}/keys")).json()["items"]
    assert [k["prefix"] for k in listed] == [tenant.prefix]
    assert listed[0]["last_used_at"] is not None
    assert tenant.key not in json.dumps(listed)  # secrets are never listed

    # Rotation with a grace period: both keys work until it ends.
    rotated = await admin.post(f"/admin/v1/keys/{tenant.prefix}/rotate", json={"grace_s": 2})
    assert rotated.status_code == 201, rotated.text
    new_key = rotated.json()["key"]
    assert rotated.json()["replaces"]["expires_at"] is not None
    assert await _status(inprocess_api, tenant.key) == 200
    assert await _status(inprocess_api, new_key) == 200

    async def grace_over():  # the old key ends with its grace period, and only the old key
        return await _status(inprocess_api, tenant.key) == 401

    await wait_until(grace_over, timeout=30)
    assert await _status(inprocess_api, new_key) == 200

    # Rotation without grace ends the old key at once; revocation too.
    again = (await admin.post(f"/admin/v1/keys/{new_key[4:16]}/rotate", json={})).json()
    assert await _status(inprocess_api, new_key) == 401
    assert await _status(inprocess_api, again["key"]) == 200
    revoked = await admin.delete(f"/admin/v1/keys/{again['details']['prefix']}")
    assert revoked.status_code == 200, revoked.text
    assert revoked.json()["revoked_at"] is not None
    assert await _status(inprocess_api, again["key"]) == 401
    gone = await admin.delete(f"/admin/v1/keys/{again['details']['prefix']}")
    assert gone.status_code == 404


async def _cli(env: dict[str, str], *args: str) -> list[dict]:
    result = await run_cli_async(env, "app", "admin", *args, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    return [json.loads(line) for line in result.stdout.splitlines()]


async def test_admin_cli(inprocess_api: InProcessApi, migrated: dict[str, str]) -> None:
    name = f"cli-{uuid.uuid4().hex[:8]}"
    (tenant,) = await _cli(migrated, "tenant-create", name)
    (issued,) = await _cli(migrated, "key-create", name, "--name", "ci")
    assert issued["details"]["tenant_id"] == tenant["id"]
    assert await _status(inprocess_api, issued["key"]) == 200
    listed = await _cli(migrated, "keys", tenant["id"])
    assert [(k["prefix"], k["name"]) for k in listed] == [(issued["details"]["prefix"], "ci")]
    await _cli(migrated, "key-revoke", issued["details"]["prefix"])
    assert await _status(inprocess_api, issued["key"]) == 401
    duplicate = await run_cli_async(migrated, "app", "admin", "tenant-create", name, timeout=120)
    assert duplicate.returncode == 1 and "exists already" in duplicate.stderr
