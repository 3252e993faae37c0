"""Per-key rate limits (token buckets) and the key-guarded /metrics."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from app.tenants.rate_limit import RateLimitedError, RateLimiter
from tests.conftest import API_KEY, ApiProcess
from tests.mcp_server.test_mcp_tools import error_text, stdio_session

METRICS_KEY = "metrics-key-for-tests"


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_bucket_allows_bursts_then_the_rate_per_key() -> None:
    clock = FakeClock()
    limiter = RateLimiter(rate_per_s=2.0, burst=3, clock=clock)
    assert [limiter.take("a") for _ in range(3)] == [0.0, 0.0, 0.0]
    assert limiter.take("a") == pytest.approx(0.5)  # one token back in 1/rate seconds
    assert limiter.take("b") == 0.0  # another key has its own bucket
    clock.now += 0.5
    assert limiter.take("a") == 0.0
    assert limiter.take("a") > 0
    clock.now += 60  # refills up to the burst, not beyond
    assert [limiter.take("a") for _ in range(4)][-1] > 0
    with pytest.raises(RateLimitedError) as refused:
        limiter.check("a")
    assert refused.value.status_code == 429
    assert refused.value.retry_after_s == 1


def start_limited_api(migrated: dict[str, str], name: str, rate: str, burst: str) -> ApiProcess:
    """An API with `rate` requests/s per key in bursts of `burst`, and /metrics behind a key.
    No background loops keep it light (it embeds through the run's embedding server)."""
    env = {
        **migrated,
        "COGNIS_RATE_LIMIT_PER_S": rate,
        "COGNIS_RATE_LIMIT_BURST": burst,
        "COGNIS_METRICS_KEY_HASHES": hashlib.sha256(METRICS_KEY.encode()).hexdigest(),
        "COGNIS_RELAY_IN_API": "false",
        "COGNIS_INGEST_WORKER_IN_API": "false",
    }
    process = ApiProcess(env, name)
    process.wait_ready()
    return process


@pytest.fixture(scope="module")
def limited_api(migrated: dict[str, str]) -> Iterator[ApiProcess]:
    """1 request/s per key in bursts of 3."""
    process = start_limited_api(migrated, "api-limited", "1", "3")
    yield process
    process.stop()


async def test_over_the_rate_a_key_gets_429_with_retry_after(limited_api: ApiProcess) -> None:
    async with httpx.AsyncClient(base_url=limited_api.url, timeout=30) as http:
        key = {"X-API-Key": API_KEY}
        statuses = [
            (await http.get("/v1/users/rl/memories", headers=key)).status_code for _ in range(5)
        ]
        assert statuses[:3] == [200, 200, 200]
        assert 429 in statuses[3:]
        refused = await http.get("/v1/users/rl/memories", headers=key)
        assert refused.status_code == 429
        assert refused.headers["content-type"].startswith("application/problem+json")
        assert int(refused.headers["Retry-After"]) >= 1
        assert "rate" in refused.json()["detail"]
        # A wrong key is refused as unauthorised (401), before any rate is looked at.
        wrong = await http.get("/v1/users/rl/memories", headers={"X-API-Key": "x"})
        assert wrong.status_code == 401

        # /metrics needs the metrics key here.
        assert (await http.get("/metrics")).status_code == 401
        assert (await http.get("/metrics", headers=key)).status_code == 401
        metrics = await http.get("/metrics", headers={"X-API-Key": METRICS_KEY})
        assert metrics.status_code == 200
        assert "cognis_" in metrics.text


@pytest.fixture
def no_refill_api(migrated: dict[str, str]) -> Iterator[ApiProcess]:
    """Bursts of 4 and a token back every 1,000 s: no token comes back during a test, so
    every request's cost shows in what is left."""
    process = start_limited_api(migrated, "api-no-refill", "0.001", "4")
    yield process
    process.stop()


def _tool_call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }


async def test_an_mcp_call_spends_one_token_and_a_429_gives_its_wait(
    no_refill_api: ApiProcess, user_id: str
) -> None:
    """/mcp counts the call; the API calls its tool makes in process count nothing (a
    get_memory by short id makes three). Over the rate, /mcp itself answers 429. (One test:
    the key's bucket, emptied here, is the process's.)"""
    key = {"X-API-Key": API_KEY}
    mcp_headers = {
        **key,
        "X-Cognis-User": user_id,
        "Accept": "application/json, text/event-stream",
    }
    async with httpx.AsyncClient(base_url=no_refill_api.url, timeout=60) as http:
        created = await http.post(
            f"/v1/users/{user_id}/memories", json={"content": "Noor sings alto."}, headers=key
        )  # token 1
        assert created.status_code == 201, created.text
        short = created.json()["id"][:8]
        answers = [
            await http.post(
                "/mcp", json=_tool_call("get_memory", {"memory_id": short}), headers=mcp_headers
            )
            for _ in range(4)
        ]  # tokens 2, 3, 4, then none left
    for answer in answers[:3]:
        assert answer.status_code == 200, answer.text
        result = answer.json()["result"]
        assert result["isError"] is False, result
        got = result.get("structuredContent") or json.loads(result["content"][0]["text"])
        assert got["memory"]["content"] == "Noor sings alto."
    refused = answers[3]
    assert refused.status_code == 429
    assert refused.headers["content-type"].startswith("application/problem+json")
    assert int(refused.headers["Retry-After"]) > 60
    assert "rate" in refused.json()["detail"]

    # Over stdio each tool call is API calls of the key: a 429 among them, whose wait is
    # longer than the client's retries would sit out, is the tool's error with the seconds.
    async with stdio_session(no_refill_api, user_id) as mcp:
        inner = await mcp.call_tool("add_memory", {"content": "Noor sings alto."})
    text = error_text(inner)
    assert "429" in text and "over its rate limit" in text
    wait_s = int(re.search(r"wait (\d+) s, then call again", text).group(1))  # type: ignore[union-attr]
    assert 60 < wait_s <= 1000
    assert "idempotency_key=" in text
