"""Webhook fixtures: a receiver on loopback, the operator's permission to reach it, and a
tenant of the test's own (its subscriptions see nothing of other tests')."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from tests.conftest import InProcessApi
from tests.tenants.helpers import new_tenant, tenant_client
from tests.webhooks.helpers import Receiver


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = Receiver()
    yield server
    server.close()


@pytest.fixture
def allow_private(inprocess_api: InProcessApi, monkeypatch: pytest.MonkeyPatch) -> None:
    """The operator's COGNIS_WEBHOOK_ALLOW_PRIVATE=true, for a receiver on loopback."""
    settings = inprocess_api.app.state.runtime.settings
    monkeypatch.setattr(settings.relay, "webhook_allow_private", True)


@pytest.fixture
async def tenant(admin: httpx.AsyncClient, inprocess_api: InProcessApi) -> AsyncIterator[Any]:
    key = await new_tenant(admin, "hooks")
    async with tenant_client(inprocess_api, key.key) as client:
        yield client
