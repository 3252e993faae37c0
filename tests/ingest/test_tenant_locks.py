"""Ingestion's per-user serialisation names the tenant (issue 54): a lock held on one tenant's
user never holds another tenant's user of the same id, and still holds its own."""

from __future__ import annotations

import asyncio
import uuid

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.conftest import InProcessApi
from tests.factories import hold_user_lock
from tests.ingest.helpers import ingest, message, wait_job
from tests.tenants.helpers import new_tenant, tenant_client

pytestmark = pytest.mark.usefixtures("ingest_worker")


async def test_one_tenants_held_user_does_not_hold_another_tenants_user_of_the_same_id(
    admin: httpx.AsyncClient, inprocess_api: InProcessApi, db: AsyncEngine
) -> None:
    first, second = await new_tenant(admin, "lock-a"), await new_tenant(admin, "lock-b")
    user = f"same-{uuid.uuid4().hex[:8]}"
    async with (
        tenant_client(inprocess_api, first.key) as a,
        tenant_client(inprocess_api, second.key) as b,
        db.connect() as holder,
    ):
        await holder.begin()
        # As another worker holds it (FOR NO KEY UPDATE, app/ingest/repository.py).
        await hold_user_lock(holder, first.tenant_id, user, "NO KEY UPDATE")
        # The other tenant's user of the same id is applied while the first one's is held.
        job = await asyncio.wait_for(ingest(b, user, message("I keep bees in Ghent")), 60)
        assert job["state"] == "done"
        # The held one waits for the lock (the key is the one the worker takes)...
        queued = await ingest(a, user, message("I keep goats in Lyon"), wait=False)
        await asyncio.sleep(3.0)
        still = await a.get(f"/v1/users/{user}/jobs/{queued['job_id']}")
        assert still.json()["state"] != "done", still.json()
        await holder.rollback()
        # ...and is applied once it is free.
        assert (await wait_job(a, user, queued["job_id"]))["state"] == "done"
