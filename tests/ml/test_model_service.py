"""The machine's model service (`python -m app embed-serve`) schedules the work of every
process that embeds through it: two clients with connections of their own stand for two API
processes (at the server, a process is nothing but its connections and the work it names).

The service here is a real subprocess with the small provisioned model (all-MiniLM-L6-v2), one
scheduler for queries and writes (`COGNIS_QUERY_EMBEDDING_BACKEND=same`), so that a query's
wait is the scheduler's doing: each answer reports how many model calls its request waited for.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from app.errors import DeadlineExceededError, TooMuchWorkError
from app.ml.http_encoder import (
    DEADLINE_HEADER,
    TENANT_HEADER,
    WORK_CLASS_HEADER,
    HttpEncoder,
    HttpEndpoint,
)
from app.ml.scheduling.work import Deadline, Work, WorkClass
from tests import services
from tests.conftest import wait_until

# `make test-fast` leaves these out: they start a model service of their own (a model load).
pytestmark = pytest.mark.services

TENANT_A, TENANT_B = uuid.UUID(int=0xA), uuid.UUID(int=0xB)
# Chat-length texts, each different (no cache anywhere makes one cheaper than another).
LONG = "Caroline told Melanie about the pottery class, the camping trip and the support group"
LOG = "test-model-service.log"


@pytest.fixture(scope="module")
def service() -> Iterator[str]:
    minilm = services.CACHE_DIR / "models" / "all-MiniLM-L6-v2"
    if not (minilm / "modules.json").exists():
        pytest.skip(f"no all-MiniLM-L6-v2 at {minilm}")
    server = services.EmbeddingServer(str(minilm), log_name=LOG)
    try:
        yield services.wait_until_loaded(server.url, LOG)
    finally:
        server.stop()  # each test waits for the work it sent: none is left for the next


def texts(label: str, n: int) -> list[str]:
    return [f"{label} {i}: {LONG} ({i * 7919 % 1000})" for i in range(n)]


async def embed(
    http: httpx.AsyncClient,
    inputs: list[str],
    work_class: str,
    tenant: uuid.UUID,
    **headers: str,
) -> dict[str, Any]:
    response = await http.post(
        "/v1/embeddings",
        json={"input": inputs, "user": "u1"},
        headers={WORK_CLASS_HEADER: work_class, TENANT_HEADER: str(tenant), **headers},
        timeout=600,
    )
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    assert len(body["data"]) == len(inputs)
    return body


async def queued_bulk(http: httpx.AsyncClient) -> int:
    health = (await http.get("/health")).json()
    return int(health["memories"]["queued_texts"]["bulk"])


async def test_queries_and_writes_wait_for_one_model_call_whatever_another_process_imports(
    service: str,
) -> None:
    async with (
        httpx.AsyncClient(base_url=service) as importer,  # "API process" 1: a bulk import
        httpx.AsyncClient(base_url=service) as serving,  # "API process" 2: a user's requests
    ):
        finished: dict[str, float] = {}

        async def timed(name: str, *args: Any) -> dict[str, Any]:
            body = await embed(*args)
            finished[name] = time.monotonic()
            return body

        imports = [
            asyncio.create_task(timed(f"bulk{i}", importer, texts(f"a{i}", 256), "bulk", TENANT_A))
            for i in range(6)
        ]

        async def importing() -> bool:
            return await queued_bulk(serving) >= 512

        await wait_until(importing, timeout=120, interval=0.05)

        # Tenant B's own import, sent after all of A's, and background work after both.
        other_tenant = asyncio.create_task(
            timed("tenant_b", importer, texts("b", 64), "bulk", TENANT_B)
        )
        background = asyncio.create_task(
            timed("background", importer, texts("s", 8), "background", TENANT_B)
        )

        waits = []
        for i in range(4):
            query = await embed(serving, [f"where did Caroline go? {i}"], "query", TENANT_B)
            write = await embed(serving, [f"Caroline moved to Porto {i}."], "interactive", TENANT_B)
            waits += [query["cognis"], write["cognis"]]
        still_importing = await queued_bulk(serving)
        await asyncio.gather(*imports, other_tenant, background)

    assert still_importing > 0, "the import was over before the queries: nothing was tested"
    assert [w["work_class"] for w in waits] == ["query", "interactive"] * 4
    # The model cannot be interrupted: the call running when a request came is all it waits.
    assert all(w["waited_calls"] <= 1 for w in waits), waits
    # Fair between tenants: B's later import is not left behind A's whole backlog.
    assert finished["tenant_b"] < max(finished[f"bulk{i}"] for i in range(6))
    # Background work only once nobody else's waits.
    assert finished["background"] >= max(v for k, v in finished.items() if k != "background")


async def test_refusals_come_back_as_the_callers_own_errors(service: str) -> None:
    async with httpx.AsyncClient(base_url=service) as http:
        # Learn the model's speed, in tokens, from a call of some size.
        await embed(http, texts("warm", 64), "bulk", TENANT_A)
        health = (await http.get("/health")).json()["memories"]
        assert health["cost_unit"] == "tokens" and health["units_per_s"] > 0

        # A deadline already spent: 503 with Retry-After, in OpenAI's error shape.
        late = await http.post(
            "/v1/embeddings",
            json={"input": ["too late"]},
            headers={WORK_CLASS_HEADER: "interactive", DEADLINE_HEADER: "1"},
        )
        assert late.status_code == 503 and late.headers["retry-after"] == "1"
        assert late.json()["error"]["type"] == "deadline_exceeded"

        # 2,048 chat-length texts need far more than a second of model time: 413 at once, with
        # the time needed and how many texts would fit.
        many = texts("many", 2048)
        refused = await http.post(
            "/v1/embeddings",
            json={"input": many},
            headers={WORK_CLASS_HEADER: "bulk", DEADLINE_HEADER: "1000"},
        )
        assert refused.status_code == 413, refused.text
        error = refused.json()["error"]
        assert error["type"] == "too_much_work" and error["needed_ms"] > 1000
        assert error["fitting_texts"] == int(2048 * 1000 / error["needed_ms"])

        bad = await http.post(
            "/v1/embeddings", json={"input": ["x"]}, headers={WORK_CLASS_HEADER: "urgent"}
        )
        assert bad.status_code == 400 and "query, interactive, bulk" in bad.text

    # An API process's http backend turns them into its own errors, not retried.
    encoder = HttpEncoder(HttpEndpoint(url=f"{service}/v1", model="all-MiniLM-L6-v2"))
    try:
        with pytest.raises(TooMuchWorkError) as too_much:
            await asyncio.to_thread(
                encoder.encode_work, many, Work(WorkClass.BULK, deadline=Deadline.after_ms(1000))
            )
        assert too_much.value.extra["fitting_texts"] >= 1
        with pytest.raises(DeadlineExceededError):
            spent = Deadline(time.monotonic() - 1, 50)
            await asyncio.to_thread(
                encoder.encode_work, ["late"], Work(WorkClass.INTERACTIVE, deadline=spent)
            )
    finally:
        encoder.close()
