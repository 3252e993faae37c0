"""One tenant's slow webhook receivers cannot hold another tenant's events, nor an erase
(issue 54): the dispatcher bounds each POST as a whole, records each as soon as it ends,
gives a tenant at most COGNIS_WEBHOOK_TENANT_CONCURRENCY POSTs in flight, claims round-robin
across tenants, and holds no row lock while a POST is in flight.

Each test runs a dispatcher of its own (its settings changed for the test) with the session's
other processes frozen, and tells what happened in which order from the receivers (which
request is still open), not from wall-clock thresholds."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import structlog

from app.webhooks.delivery import WebhookDispatcher
from tests.conftest import InProcessApi, only_running, wait_until
from tests.tenants.helpers import new_tenant, tenant_client
from tests.webhooks.helpers import Receiver, SlowReceiver, memories_path, subscribe

# Subscribing to loopback receivers needs the operator's permission.
pytestmark = pytest.mark.usefixtures("allow_private")


def own_dispatcher(api: InProcessApi, **relay: Any) -> WebhookDispatcher:
    """A dispatcher on the in-process API's background role, with these relay settings
    changed (loopback receivers allowed)."""
    runtime = api.app.state.runtime
    settings = runtime.settings.relay.model_copy(update={"webhook_allow_private": True, **relay})
    return WebhookDispatcher(runtime.background_sessionmaker, settings, runtime.settings.store)


@contextlib.asynccontextmanager
async def dispatching(dispatcher: WebhookDispatcher) -> AsyncIterator[None]:
    """The dispatcher's loop running for the block (and the session's other processes
    frozen, so it delivers alone)."""
    stop = asyncio.Event()
    with only_running():
        task = asyncio.create_task(dispatcher.run_forever(stop))
        try:
            yield
        finally:
            stop.set()
            await task


def user(label: str) -> str:
    return f"{label}-{uuid.uuid4().hex[:8]}"


async def test_a_tenants_sleeping_and_trickling_receivers_do_not_hold_another_tenants_events(
    tenant: httpx.AsyncClient,
    admin: httpx.AsyncClient,
    inprocess_api: InProcessApi,
    receiver: Receiver,
) -> None:
    sleeping, trickling = SlowReceiver("hold"), SlowReceiver("trickle")
    other_key = await new_tenant(admin, "hooks-other")
    try:
        async with tenant_client(inprocess_api, other_key.key) as other:
            await subscribe(tenant, sleeping.url, event_types=["memory.created"])
            await subscribe(tenant, trickling.url, event_types=["memory.created"])
            await subscribe(other, receiver.url, event_types=["memory.created"])
            # A deadline longer than the test: the slow POSTs are in flight throughout.
            dispatcher = own_dispatcher(
                inprocess_api, webhook_tenant_concurrency=2, webhook_timeout_s=120
            )
            async with dispatching(dispatcher):
                # Three memories of the slow tenant: six events, two slots.
                for n in range(3):
                    created = await tenant.post(
                        memories_path(user(f"slow{n}")), json={"content": f"slow fact {n}"}
                    )
                    assert created.status_code == 201, created.text

                async def both_in_flight() -> bool:
                    return sleeping.open_now == 1 and trickling.open_now == 1

                await wait_until(both_in_flight)
                created = await other.post(
                    memories_path(user("fast")), json={"content": "the other tenant's fact"}
                )
                assert created.status_code == 201, created.text

                async def delivered() -> list[dict[str, Any]]:
                    return receiver.accepted("memory.created")

                (event,) = await wait_until(delivered)
                assert event["data"]["content"] == "the other tenant's fact"
                # Delivered while the slow tenant's POSTs were still open, and that tenant
                # never had more than its two slots: its four other events wait their turn.
                assert sleeping.open_now == 1 and trickling.open_now == 1
                assert sleeping.requests == 1 and trickling.requests == 1
                # A freed slot is filled at once: the sleeper answers, its next event goes.
                sleeping.release.set()

                async def next_one_sent() -> bool:
                    return sleeping.requests + trickling.requests >= 3

                await wait_until(next_one_sent)
                assert sleeping.max_open + trickling.max_open <= 3
    finally:
        sleeping.close()
        trickling.close()


async def test_a_trickling_receiver_fails_at_the_deadline_each_try_then_is_dead(
    tenant: httpx.AsyncClient, inprocess_api: InProcessApi
) -> None:
    trickling = SlowReceiver("trickle", every_s=0.2)
    try:
        hook = await subscribe(tenant, trickling.url, event_types=["memory.created"])
        dispatcher = own_dispatcher(
            inprocess_api,
            webhook_timeout_s=1.0,
            webhook_max_attempts=2,
            webhook_backoff_base_s=0.01,
        )
        path = f"/v1/webhooks/{hook['id']}/deliveries"

        async def settled() -> list[dict[str, Any]]:
            items = (await tenant.get(path)).json()["items"]
            return items if items and items[0]["status"] != "pending" else []

        async with dispatching(dispatcher):
            created = await tenant.post(
                memories_path(user("trickled")), json={"content": "answered slowly"}
            )
            assert created.status_code == 201, created.text
            (delivery,) = await wait_until(settled)
        # 100 bytes at 5 a second would take 20 s; each try stops at the 1 s deadline.
        assert delivery["status"] == "dead"
        assert len(delivery["log"]) == 2
        for attempt in delivery["log"]:
            assert attempt["status_code"] is None
            assert attempt["error"].startswith("Timeout"), attempt["error"]
            assert 900 <= attempt["duration_ms"] < 5000, attempt
        assert trickling.requests == 2
    finally:
        trickling.close()


async def test_an_erase_completes_while_a_delivery_of_the_user_is_in_flight(
    tenant: httpx.AsyncClient, inprocess_api: InProcessApi
) -> None:
    sleeping = SlowReceiver("hold")
    try:
        hook = await subscribe(tenant, sleeping.url, event_types=["memory.created"])
        dispatcher = own_dispatcher(inprocess_api, webhook_timeout_s=120)
        erased_user = user("erased-in-flight")
        with structlog.testing.capture_logs() as logs:
            async with dispatching(dispatcher):
                created = await tenant.post(
                    memories_path(erased_user), json={"content": "about to be erased"}
                )
                assert created.status_code == 201, created.text

                async def in_flight() -> bool:
                    return sleeping.open_now == 1

                await wait_until(in_flight)
                erased = await tenant.delete(f"/v1/users/{erased_user}")
                assert erased.status_code == 200, erased.text
                # The erase did not wait: the receiver has not answered yet.
                assert sleeping.open_now == 1 and not sleeping.release.is_set()
                assert erased.json()["postgres"]["webhook_deliveries"] == 1
                sleeping.release.set()

                async def answered() -> bool:
                    return sleeping.open_now == 0 and dispatcher.in_flight == 0

                await wait_until(answered)
        # The answer to an erased delivery is dropped, not an error: nothing is left of it.
        assert not [e for e in logs if e["event"] == "webhooks.record_failed"], logs
        items = (await tenant.get(f"/v1/webhooks/{hook['id']}/deliveries")).json()["items"]
        assert items == []
    finally:
        sleeping.close()
