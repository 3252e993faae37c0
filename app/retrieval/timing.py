"""One timer for the stages of a request: `with timer.stage("bm25_ms"): ...`."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager


class StageTimer:
    def __init__(self) -> None:
        self.durations: dict[str, float] = {}
        self._started = time.perf_counter()

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.durations[name] = round((time.perf_counter() - started) * 1000, 3)

    def total_ms(self) -> float:
        return round((time.perf_counter() - self._started) * 1000, 3)
