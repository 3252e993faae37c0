"""The web console is bound to the logged-in key's tenant, like the API: a tenant's key sees
its own users and memories there and nothing of another tenant's same-named user."""

from __future__ import annotations

import uuid

import httpx

from tests.conftest import InProcessApi
from tests.console.test_console_csrf import form_token
from tests.tenants.helpers import new_tenant, tenant_client


async def _log_in(console: httpx.AsyncClient, key: str) -> None:
    """A console session: logged in with the key through the login page's form (its token and
    pre-session cookie), the client keeping the cookies."""
    token = form_token(await console.get("/console/login"))
    logged_in = await console.post(
        "/console/login", data={"csrf": token, "key": key}, follow_redirects=False
    )
    assert logged_in.status_code in (302, 303), logged_in.text


async def test_the_console_shows_only_the_keys_tenant(
    inprocess_api: InProcessApi, admin: httpx.AsyncClient
) -> None:
    user = f"alice-{uuid.uuid4().hex[:6]}"
    tenants = [await new_tenant(admin, label) for label in ("ca", "cb")]
    secrets = [f"zq{uuid.uuid4().hex[:10]}" for _ in tenants]
    for tenant, secret in zip(tenants, secrets, strict=True):
        async with tenant_client(inprocess_api, tenant.key) as http:
            made = await http.post(
                f"/v1/users/{user}/memories", json={"content": f"My code word is {secret}"}
            )
            assert made.status_code == 201, made.text

    for tenant, own, other in ((tenants[0], secrets[0], secrets[1]), (tenants[1], *secrets[::-1])):
        async with inprocess_api.client() as console:
            await _log_in(console, tenant.key)
            users = await console.get("/console/", params={"prefix": user})
            assert users.status_code == 200, users.text
            assert user in users.text
            memories = await console.get(f"/console/users/{user}")
            assert memories.status_code == 200, memories.text
            assert own in memories.text
            assert other not in memories.text
