"""Per-key rate limits: a token bucket per API key, in this process.

Each key may make `rate_limit_per_s` requests a second on average, in bursts of up to
`rate_limit_burst`. Over it, the request is refused with 429 and Retry-After (the seconds until
a token is back). Buckets live in the process: with N API processes a key gets up to N times
the rate (a shared store such as Redis would be needed for one global figure)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from app.errors import CognisError

# Above this many buckets, those that have refilled completely (idle keys) are dropped.
MAX_IDLE_BUCKETS = 10_000


class RateLimitedError(CognisError):
    status_code = 429
    title = "Too many requests"

    def __init__(self, detail: str, retry_after_s: int) -> None:
        super().__init__(detail)
        self.retry_after_s = retry_after_s


@dataclass(slots=True)
class _Bucket:
    tokens: float
    updated: float


class RateLimiter:
    def __init__(
        self, rate_per_s: float, burst: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.rate = rate_per_s
        self.burst = max(burst, 1)
        self._clock = clock
        self._buckets: dict[str, _Bucket] = {}

    def take(self, key: str) -> float:
        """Take one token for `key`: 0.0 if there was one, else the seconds until there is."""
        now = self._clock()
        bucket = self._buckets.get(key)
        if bucket is None:
            if len(self._buckets) >= MAX_IDLE_BUCKETS:
                self._drop_full(now)
            bucket = self._buckets[key] = _Bucket(tokens=float(self.burst), updated=now)
        bucket.tokens = min(self.burst, bucket.tokens + (now - bucket.updated) * self.rate)
        bucket.updated = now
        if bucket.tokens >= 1.0:
            bucket.tokens -= 1.0
            return 0.0
        return (1.0 - bucket.tokens) / self.rate

    def check(self, key: str) -> None:
        """Raise RateLimitedError (429, Retry-After) when `key` is over its rate."""
        wait_s = self.take(key)
        if wait_s > 0:
            raise RateLimitedError(
                f"this API key is over its rate of {self.rate:g} requests/s "
                f"(bursts of {self.burst}); retry after {math.ceil(wait_s)} s",
                retry_after_s=math.ceil(wait_s),
            )

    def _drop_full(self, now: float) -> None:
        self._buckets = {
            key: bucket
            for key, bucket in self._buckets.items()
            if bucket.tokens + (now - bucket.updated) * self.rate < self.burst
        }
