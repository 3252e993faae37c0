"""Who may use the model service, and how much one request may ask of it: the bearer key, the
bounds on its inputs, and the work of a client that has gone, which leaves the queue instead
of being embedded for nobody.

The service is a real `python -m app embed-serve` with the small provisioned model
(all-MiniLM-L6-v2) and a key, as `make up` runs it.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from app.ml.http_encoder import MAX_INPUTS, MAX_TEXT_CHARS, TENANT_HEADER, WORK_CLASS_HEADER
from tests import services
from tests.conftest import wait_until

# `make test-fast` leaves these out: they start a model service of their own (a model load).
pytestmark = pytest.mark.services

KEY = "test-model-service-key"
AUTH = {"Authorization": f"Bearer {KEY}"}
LOG = "test-model-service-guards.log"
LONG = "Caroline told Melanie about the pottery class, the camping trip and the support group"


@pytest.fixture(scope="module")
def service() -> Iterator[str]:
    minilm = services.CACHE_DIR / "models" / "all-MiniLM-L6-v2"
    if not (minilm / "modules.json").exists():
        pytest.skip(f"no all-MiniLM-L6-v2 at {minilm}")
    server = services.EmbeddingServer(
        str(minilm), settings={"COGNIS_EMBEDDING_HTTP_API_KEY": KEY}, log_name=LOG
    )
    try:
        yield services.wait_until_loaded(server.url, LOG)
    finally:
        server.stop()


async def health(http: httpx.AsyncClient) -> dict[str, Any]:
    body: dict[str, Any] = (await http.get("/health")).json()["memories"]
    return body


async def test_only_a_caller_with_the_key_embeds(service: str) -> None:
    async with httpx.AsyncClient(base_url=service, timeout=60) as http:
        none = await http.post("/v1/embeddings", json={"input": ["hello"]})
        wrong = await http.post(
            "/v1/embeddings", json={"input": ["hello"]}, headers={"Authorization": "Bearer x"}
        )
        right = await http.post("/v1/embeddings", json={"input": ["hello"]}, headers=AUTH)
        opened = await http.get("/health")  # health checks (compose, ECS) need no key
    assert (none.status_code, wrong.status_code, right.status_code) == (401, 401, 200)
    assert none.json()["error"]["message"] == "a valid bearer key is required"
    assert len(right.json()["data"]) == 1
    assert opened.status_code == 200


async def test_oversized_inputs_are_refused_at_once(service: str) -> None:
    async with httpx.AsyncClient(base_url=service, timeout=60) as http:
        before = (await health(http))["texts"]
        started = time.monotonic()
        huge = await http.post(
            "/v1/embeddings", json={"input": ["x" * 9_900_000]}, headers=AUTH
        )  # the attack run's 9.9 MB string: ~21 s of CPU before
        huge_s = time.monotonic() - started
        longest = await http.post(
            "/v1/embeddings", json={"input": ["ok", "y" * (MAX_TEXT_CHARS + 1)]}, headers=AUTH
        )
        fits = await http.post(
            "/v1/embeddings", json={"input": ["z" * MAX_TEXT_CHARS]}, headers=AUTH
        )
        many = await http.post(
            "/v1/embeddings", json={"input": ["a"] * (MAX_INPUTS + 1)}, headers=AUTH
        )
        after = (await health(http))["texts"]
    assert huge.status_code == 413, huge.text
    print(f"\n9.9 MB text refused in {huge_s * 1000:.0f} ms")
    assert huge_s < 5, f"refusing took {huge_s:.1f} s"
    assert longest.status_code == 413 and "input 1 has" in longest.json()["error"]["message"]
    assert fits.status_code == 200, fits.text
    assert many.status_code == 400, many.text
    assert after - before == 1, "only the text within bounds reached the model"


async def test_the_work_of_a_client_that_has_gone_leaves_the_queue(service: str) -> None:
    """A client queues texts behind an import of the same user (one flow: they wait in
    order), then gives up (its timeout); its texts are never embedded."""
    importing = [f"import {i}: {LONG} ({i * 7919 % 1000})" for i in range(768)]
    abandoned = [f"abandoned {i}: {LONG}" for i in range(256)]
    headers = {**AUTH, WORK_CLASS_HEADER: "bulk", TENANT_HEADER: str(uuid.UUID(int=0xA))}
    async with (
        httpx.AsyncClient(base_url=service, timeout=600) as http,
        httpx.AsyncClient(base_url=service, timeout=600) as impatient,
    ):
        before = (await health(http))["texts"]
        body = {"input": importing, "user": "u1"}
        the_import = asyncio.create_task(http.post("/v1/embeddings", json=body, headers=headers))

        async def import_queued() -> bool:
            return int((await health(http))["queued_texts"]["bulk"]) >= 512

        await wait_until(import_queued, timeout=120, interval=0.05)
        gone = asyncio.create_task(
            impatient.post(
                "/v1/embeddings", json={"input": abandoned, "user": "u1"}, headers=headers
            )
        )

        async def both_queued() -> int:
            queued = int((await health(http))["queued_texts"]["bulk"])
            return queued if queued > len(abandoned) else 0

        await wait_until(both_queued, timeout=60, interval=0.02)
        gone.cancel()  # the client gives up: its connection closes
        with pytest.raises(asyncio.CancelledError):
            await gone

        async def dropped() -> bool:
            state = await health(http)
            done = int(state["texts"]) - before
            return int(state["queued_texts"]["bulk"]) <= len(importing) - done

        await wait_until(dropped, timeout=30, interval=0.05)
        still_importing = not the_import.done()
        response = await the_import
        await asyncio.sleep(1)  # any text still queued would now reach the model
        after = await health(http)

    assert response.status_code == 200, response.text
    assert still_importing, "the import was over before the client left: nothing was tested"
    assert after["queued_texts"]["bulk"] == 0
    assert after["texts"] - before == len(importing), "only the import's texts were embedded"
