"""One model service, two real API processes embedding through it (issue 34): a bulk import
through one process never delays a query (or a single write) through the other by more than one
model call, whether it is another tenant's or the importing user's own, and a second tenant's
smaller batch is not left behind the first tenant's backlog.

The service is a subprocess of this test's own with the small provisioned model
(all-MiniLM-L6-v2) and one scheduler for queries and writes (`COGNIS_QUERY_EMBEDDING_BACKEND=
same`), so a query's wait is the scheduler's doing. The API does not say how its embeddings
waited; the service's own account does: its /health counts, per class, the requests that
reached the model and those that waited for more than one model call, read before and after.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests import services
from tests.conftest import ADMIN_KEY, ApiProcess, wait_until
from tests.tenants.helpers import new_tenant

# On the worker of the other tests that start two API processes: never four at once.
pytestmark = pytest.mark.xdist_group("two_api_processes")

LOG = "test-scheduling-embed-serve.log"
# Tenant A's import keeps this many batches of the most memories a batch may hold in flight
# through process 1: its queue at the model service stays hundreds of texts deep.
IMPORTS_IN_FLIGHT = 3
IMPORT_BATCH = 100
TENANT_B_BATCH = 16
ROUNDS = 3  # of a search and a single write by each tenant, through process 2
LONG = "Caroline told Melanie about the pottery class, the camping trip and the support group"


@pytest.fixture
def one_service_two_apis(
    migrated: dict[str, str],
) -> Iterator[tuple[str, ApiProcess, ApiProcess]]:
    minilm = services.CACHE_DIR / "models" / "all-MiniLM-L6-v2"
    if not (minilm / "modules.json").exists():
        pytest.skip(f"no all-MiniLM-L6-v2 at {minilm}")
    server = services.EmbeddingServer(str(minilm), log_name=LOG)
    env = {
        **migrated,
        "COGNIS_EMBEDDING_MODEL": str(minilm),
        "COGNIS_EMBEDDING_HTTP_URL": f"{server.url}/v1",
        # Nothing of the processes' own beside the test's requests: no other test's tasks or
        # outbox rows embedded or indexed with this model.
        "COGNIS_INGEST_QUEUE": f"scheduling-{uuid.uuid4().hex[:8]}",
        "COGNIS_INGEST_WORKER_IN_API": "false",
        "COGNIS_RELAY_IN_API": "false",
    }
    apis: list[ApiProcess] = []
    try:
        # The processes start once the model answers: each trains its category classifier at
        # start-up (embedding the example bank the first time on a machine), not in a write.
        url = services.wait_until_loaded(server.url, LOG)
        apis = [ApiProcess(env, "api-scheduling-1"), ApiProcess(env, "api-scheduling-2")]
        for api in apis:
            api.wait_ready()
        yield url, apis[0], apis[1]
    finally:
        for api in apis:
            api.stop()
        server.stop()


def texts(label: str, n: int) -> list[str]:
    return [f"{label} {i}: {LONG} ({i * 7919 % 1000})" for i in range(n)]


async def memories_model(model: httpx.AsyncClient) -> dict[str, Any]:
    """The service's scheduler of memories (queries share it here)."""
    health: dict[str, Any] = (await model.get("/health")).json()
    assert health["queries"] == "memories"
    state: dict[str, Any] = health["memories"]
    return state


async def queued_bulk(model: httpx.AsyncClient) -> int:
    return int((await memories_model(model))["queued_texts"]["bulk"])


def waits_since(before: dict[str, Any], after: dict[str, Any], work_class: str) -> dict[str, int]:
    old, new = before["waited_calls"][work_class], after["waited_calls"][work_class]
    return {
        "requests": new["requests"] - old["requests"],
        "over_one_call": new["over_one_call"] - old["over_one_call"],
        "max_waited_calls": new["max_waited_calls"],
    }


async def write_batch(http: httpx.AsyncClient, user: str, contents: list[str]) -> None:
    memories = [{"content": c} for c in contents]
    response = await http.post(f"/v1/users/{user}/memories/batch", json={"memories": memories})
    assert response.status_code == 201, response.text


async def write_one(http: httpx.AsyncClient, user: str, content: str) -> None:
    response = await http.post(f"/v1/users/{user}/memories", json={"content": content})
    assert response.status_code == 201, response.text


async def search(http: httpx.AsyncClient, user: str, query: str) -> None:
    response = await http.post(f"/v1/users/{user}/search", json={"query": query})
    assert response.status_code == 200, response.text


async def test_an_import_through_one_process_never_delays_a_query_through_the_other(
    one_service_two_apis: tuple[str, ApiProcess, ApiProcess],
) -> None:
    service, first, second = one_service_two_apis
    user_a, user_b, bulk_b = (f"{who}-{uuid.uuid4().hex[:8]}" for who in ("a", "b", "bb"))
    async with (
        httpx.AsyncClient(base_url=service, timeout=30) as model,
        first.client(timeout=120) as importer,  # tenant A (the API key's own), process 1
        second.client(timeout=120) as a_second,  # the same tenant and user, process 2
        second.client(timeout=120) as admin,
        second.client(timeout=120) as b_second,  # tenant B, process 2
    ):
        admin.headers["X-API-Key"] = ADMIN_KEY
        b_second.headers["X-API-Key"] = (await new_tenant(admin, "scheduling")).key
        # Each process's first write and search: connections made, nothing left to warm.
        await write_one(importer, user_a, "Ines keeps bees on the roof.")
        await write_one(b_second, user_b, "Caroline moved to Porto.")
        await search(a_second, user_a, "who keeps bees?")
        before = await memories_model(model)

        stop = asyncio.Event()

        async def keep_importing(slot: int) -> None:
            sent = 0
            while not stop.is_set():
                await write_batch(importer, user_a, texts(f"a{slot}-{sent}", IMPORT_BATCH))
                sent += 1

        async def tenant_b_batch() -> dict[str, Any]:
            await write_batch(b_second, bulk_b, texts("b", TENANT_B_BATCH))
            return await memories_model(model)

        async def backlog() -> bool:
            return await queued_bulk(model) >= (IMPORTS_IN_FLIGHT - 1) * IMPORT_BATCH

        running = [asyncio.create_task(keep_importing(s)) for s in range(IMPORTS_IN_FLIGHT)]
        try:
            await wait_until(backlog, timeout=120, interval=0.05)
            # Tenant B's smaller batch, sent after A's backlog, through the other process.
            at_send = await memories_model(model)
            other_tenant = asyncio.create_task(tenant_b_batch())
            running.append(other_tenant)

            # Through process 2, one at a time: searches (fresh texts: embedded, not cached)
            # and single writes of tenant B, and of the importing user itself.
            busy = []
            for i in range(ROUNDS):
                for http, user in ((b_second, user_b), (a_second, user_a)):
                    busy.append(await queued_bulk(model))
                    await search(http, user, f"where did {user} go in week {i}?")
                    busy.append(await queued_bulk(model))
                    await write_one(http, user, f"{user} visited Lisbon in week {i}.")
            busy.append(await queued_bulk(model))
            stop.set()
            at_answer = await other_tenant
            await asyncio.gather(*running)
        finally:
            for task in running:  # all done, unless the test failed: none outlives it
                task.cancel()
        after = await memories_model(model)

    assert all(busy), f"tenant A's import was not queued throughout the requests: {busy}"
    query = waits_since(before, after, "query")
    interactive = waits_since(before, after, "interactive")
    # The service's own account of every embedding those searches and writes asked for.
    assert query["requests"] == interactive["requests"] == 2 * ROUNDS, (query, interactive)
    # The model cannot be interrupted: the call running when a request came is all it waits.
    assert query["over_one_call"] == 0 and query["max_waited_calls"] <= 1, query
    assert interactive["over_one_call"] == 0 and interactive["max_waited_calls"] <= 1, interactive
    # And there was something to wait for: A's batches waited for many calls each.
    assert waits_since(before, after, "bulk")["over_one_call"] > 0
    # Fair between tenants: B's batch was answered before the model had embedded the texts A had
    # waiting when it was sent (one queue in arrival order would have embedded all of them first).
    embedded_meanwhile = at_answer["texts"] - at_send["texts"]
    waiting_ahead = at_send["queued_texts"]["bulk"]
    assert embedded_meanwhile < waiting_ahead, (embedded_meanwhile, waiting_ahead)
