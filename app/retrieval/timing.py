"""One timer for the stages of a request: `with timer.stage("bm25_ms"): ...`.

The one place a stage is measured: its duration goes in the response's `stage_durations_ms`,
the log line and the Prometheus histogram, and, while tracing is on, the same block is a span
`retrieval.<stage>` (`retrieval.bm25`, `retrieval.vector_256d`, ...) below the search's.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from app import tracing

SPAN_PREFIX = "retrieval."


def stage_label(name: str) -> str:
    """A timer key's stage (`bm25_ms` -> `bm25`): the histogram's label, the span's name."""
    return name.removesuffix("_ms")


class StageTimer:
    def __init__(self) -> None:
        self.durations: dict[str, float] = {}
        self._started = time.perf_counter()

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            with tracing.span(SPAN_PREFIX + stage_label(name)):
                yield
        finally:
            self.durations[name] = round((time.perf_counter() - started) * 1000, 3)

    def total_ms(self) -> float:
        return round((time.perf_counter() - self._started) * 1000, 3)
