"""The loop of a background worker that works only while the models are idle: the sentence
worker (sentence vectors) and the entity worker (named entities) beside the ingestion workers.

Each round it checks that every model it watches has been idle for `idle_s` (a user's write or
search comes first on a small machine), takes one small batch, and goes again at once when the
batch found work, else after `poll_s`. Nothing wakes it early: it polls for an idle model. A
failed batch (a store outage) is logged as `<events>.worker_failed` and tried again after the
pause (app/wakeup.py's `work_until_stopped`)."""

from __future__ import annotations

import abc
import asyncio
import math
from collections.abc import Sequence
from typing import Generic, Protocol, TypeVar

import structlog

from app.ml.embedder import Embedder
from app.wakeup import work_until_stopped

log = structlog.get_logger(__name__)

POLL_S = 2.0


class Progress(Protocol):
    """What one batch did: how many memories it read (none: nothing was waiting)."""

    @property
    def memories(self) -> int: ...


ReportT = TypeVar("ReportT", bound=Progress)


class IdleWorker(abc.ABC, Generic[ReportT]):
    """One batch at a time while the watched models are idle (module docstring)."""

    # The prefix of the worker's log events: "<events>.worker_started", ...
    events: str

    def __init__(self, watched: Sequence[Embedder], idle_s: float, poll_s: float = POLL_S) -> None:
        self._watched = tuple(watched)
        self._idle_s = idle_s
        self._poll_s = poll_s

    @abc.abstractmethod
    async def work(self) -> ReportT:
        """One batch of the worker's work."""

    @abc.abstractmethod
    def idle_report(self) -> ReportT:
        """The report of a round that did nothing (the models were busy)."""

    def model_idle(self) -> bool:
        return min((e.idle_s() for e in self._watched), default=math.inf) >= self._idle_s

    async def run_once(self) -> ReportT:
        """One small batch, if the models have been idle long enough (else nothing)."""
        if not self.model_idle():
            return self.idle_report()
        return await self.work()

    async def run_forever(self, stop: asyncio.Event) -> None:
        async def round_() -> bool:
            return (await self.run_once()).memories > 0

        log.info(f"{self.events}.worker_started", idle_s=self._idle_s)
        await work_until_stopped(
            round_, asyncio.Event(), stop, self._poll_s, f"{self.events}.worker_failed"
        )
        log.info(f"{self.events}.worker_stopped")
