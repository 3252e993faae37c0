"""`python -m app webhooks create|list|delete --tenant ...`: a tenant's subscriptions from the
command line, the same checks as the API, seen by that tenant's API and delivered signed with
the secret it printed; never another tenant's."""

from __future__ import annotations

import json
from typing import Any

import httpx

from tests.conftest import InProcessApi, run_cli_async, wait_until
from tests.tenants.helpers import new_tenant, tenant_client
from tests.webhooks.helpers import Receiver, memories_path, signed_by


async def _cli(env: dict[str, str], *args: str) -> Any:
    result = await run_cli_async(env, "app", "webhooks", *args)
    assert result.returncode == 0, result.stderr[-2000:]
    return [json.loads(line) for line in result.stdout.splitlines()]


async def test_the_cli_creates_lists_and_deletes_a_tenants_webhooks(
    admin: httpx.AsyncClient,
    inprocess_api: InProcessApi,
    migrated: dict[str, str],
    receiver: Receiver,
    allow_private: None,
) -> None:
    tenant = await new_tenant(admin, "cli-hooks")
    allowed = {**migrated, "COGNIS_WEBHOOK_ALLOW_PRIVATE": "true"}
    (hook,) = await _cli(
        allowed,
        "create",
        receiver.url,
        "--tenant",
        tenant.name,
        "--event-type",
        "user.erased",
        "--event-type",
        "memory.created",
    )
    assert hook["secret"].startswith("whsec_")
    assert hook["event_types"] == ["memory.created", "user.erased"]
    (listed,) = await _cli(migrated, "list", "--tenant", tenant.tenant_id)
    assert (listed["id"], listed["secret"]) == (hook["id"], None)
    assert hook["id"] not in [h["id"] for h in await _cli(migrated, "list")]  # the default's

    async with tenant_client(inprocess_api, tenant.key) as client:
        seen = (await client.get("/v1/webhooks")).json()["items"]
        assert [h["id"] for h in seen] == [hook["id"]]
        created = await client.post(memories_path("cli-user"), json={"content": "Hello hooks"})
        assert created.status_code == 201, created.text

        async def arrived() -> list[dict[str, Any]]:
            return receiver.accepted()

        (event,) = await wait_until(arrived)
        assert event["type"] == "memory.created"
        assert signed_by(event, hook["secret"])

        # The API's checks: a receiver on loopback needs the operator's permission.
        refused = await run_cli_async(
            migrated, "app", "webhooks", "create", receiver.url, "--tenant", tenant.name
        )
        assert refused.returncode == 1
        assert "COGNIS_WEBHOOK_ALLOW_PRIVATE" in refused.stderr
        # Another tenant's id is not there to delete; the tenant's own is.
        other = await run_cli_async(migrated, "app", "webhooks", "delete", hook["id"])
        assert other.returncode == 1 and "no webhook" in other.stderr
        assert await _cli(migrated, "delete", hook["id"], "--tenant", tenant.name) == [
            {"deleted": hook["id"]}
        ]
        assert (await client.get("/v1/webhooks")).json()["items"] == []
