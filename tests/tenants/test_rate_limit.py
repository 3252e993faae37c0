"""Per-key rate limits (token buckets) and the key-guarded /metrics."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

import httpx
import pytest

from app.tenants.rate_limit import RateLimitedError, RateLimiter
from tests.conftest import API_KEY, ApiProcess
from tests.services import CACHE_DIR

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


@pytest.fixture(scope="module")
def limited_api(migrated: dict[str, str]) -> Iterator[ApiProcess]:
    """An API with 1 request/s per key in bursts of 3, and /metrics behind a key. The small
    model and no background loops keep it light."""
    env = {
        **migrated,
        "COGNIS_RATE_LIMIT_PER_S": "1",
        "COGNIS_RATE_LIMIT_BURST": "3",
        "COGNIS_METRICS_KEY_HASHES": hashlib.sha256(METRICS_KEY.encode()).hexdigest(),
        "COGNIS_RELAY_IN_API": "false",
        "COGNIS_INGEST_WORKER_IN_API": "false",
        "COGNIS_QUERY_EMBEDDING_BACKEND": "same",
    }
    small = CACHE_DIR / "models" / "all-MiniLM-L6-v2"
    if (small / "modules.json").exists():
        env["COGNIS_EMBEDDING_MODEL"] = str(small)
    process = ApiProcess(env, "api-limited")
    process.wait_ready()
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
