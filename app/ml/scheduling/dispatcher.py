"""Dynamic micro-batching for one embedding model: the dispatcher and its telemetry.

Texts from concurrent callers are gathered for at most `max_wait_s`, or until `max_batch`
texts are waiting, and run as one model call: on a CPU a batch of 16 costs far less than 16
calls of one. A call is formed text by text from the head of the classes, most urgent first
(app/ml/scheduling/work.py), fairly within each (fair_queue.py), and bulk and background texts
stop joining it at the call's time budget (speed.py). Background texts go only into a call
nobody else's texts are in.

A caller whose deadline passes, or who goes away (cancelled), leaves the queue with the texts
not yet taken. One dispatcher task per event loop feeds the model one call at a time from a
worker thread; the model itself is never called concurrently. What it does is reported to a
`QueueObserver` (app/ml/observer.py: Prometheus) and counted in `BatchStats`.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

import anyio

from app.ml.scheduling.fair_queue import ClassQueue, ClassQueues, QueuedRequest
from app.ml.scheduling.speed import MIN_LEARN_CHARS, SpeedModel, character_costs
from app.ml.scheduling.work import Trace, Work, WorkClass

T = TypeVar("T")


class QueueObserver(Protocol):
    """What a batcher reports (app/metrics.py turns it into Prometheus series)."""

    def batch(self, texts: int, seconds: float) -> None:
        """One model call: its texts and duration."""

    def waited(self, work_class: WorkClass, seconds: float) -> None:
        """A request's wait until its first text went to the model (or until it left the
        queue unstarted: its deadline passed or its caller went away)."""

    def depth(self, work_class: WorkClass, texts: int) -> None:
        """Texts of the class now waiting for the model."""

    def shed(self, work_class: WorkClass) -> None:
        """A request dropped because its deadline passed before its texts were embedded."""


@dataclass
class ClassWaits:
    """Requests of one class that reached the model, by the model calls each waited for
    (`Trace.waited_calls`): what a query's "at most the call already running" is checked by."""

    requests: int = 0
    over_one_call: int = 0
    max_waited_calls: int = 0

    def add(self, waited_calls: int) -> None:
        self.requests += 1
        self.over_one_call += waited_calls > 1
        self.max_waited_calls = max(self.max_waited_calls, waited_calls)


@dataclass
class BatchStats:
    """What the batcher did: model calls and texts, and how each class's requests waited."""

    calls: int = 0
    texts: int = 0
    waits: dict[WorkClass, ClassWaits] = field(
        default_factory=lambda: {c: ClassWaits() for c in WorkClass}
    )


class MicroBatcher(Generic[T]):
    def __init__(
        self,
        encode: Callable[[list[str]], Sequence[T]],
        max_batch: int = 32,
        max_wait_s: float = 0.005,
        observer: QueueObserver | None = None,
        max_call_s: float = 0.0,
        costs: Callable[[Sequence[str]], list[int]] = character_costs,
        min_learn_cost: int = MIN_LEARN_CHARS,
    ) -> None:
        if max_batch < 1:
            raise ValueError("max_batch must be at least 1")
        self._encode = encode
        self.speed = SpeedModel(costs, min_learn_cost, max_call_s)
        self._max_batch = max_batch
        self._max_wait_s = max_wait_s
        self._observer = observer
        self._loop: asyncio.AbstractEventLoop | None = None
        self._queues: ClassQueues[T] | None = None
        self._dispatcher: asyncio.Task[None] | None = None
        self.stats = BatchStats()

    # The speed model's figures and clocks, read (and in tests set) on the batcher.
    @property
    def costs(self) -> Callable[[Sequence[str]], list[int]]:
        return self.speed.costs

    @property
    def seconds_per_unit(self) -> float | None:
        return self.speed.seconds_per_unit

    @seconds_per_unit.setter
    def seconds_per_unit(self, value: float | None) -> None:
        self.speed.seconds_per_unit = value

    @property
    def interactive_seen_at(self) -> float | None:
        return self.speed.interactive_seen_at

    @interactive_seen_at.setter
    def interactive_seen_at(self, value: float | None) -> None:
        self.speed.interactive_seen_at = value

    @property
    def foreground_seen_at(self) -> float | None:
        return self.speed.foreground_seen_at

    def idle_s(self) -> float:
        return self.speed.idle_s()

    def arrived(self, work: Work) -> None:
        """Work has come for the model (here, or through this process to the model service)."""
        self.speed.arrived(work)

    def model_seconds(self, costs: Sequence[int]) -> float:
        return self.speed.model_seconds(costs)

    def call_budget(self, work_class: WorkClass = WorkClass.BULK) -> float:
        return self.speed.call_budget(work_class)

    def _learn(self, cost: int, seconds: float) -> None:
        self.speed.learn(cost, seconds)

    def queued(self, work_class: WorkClass) -> int:
        """Texts of the class waiting for the model (in this event loop)."""
        return self._queues.by_class[work_class].texts if self._queues is not None else 0

    async def submit(self, texts: list[str], work: Work, trace: Trace | None = None) -> list[T]:
        """The model's output for each text, in order, once every text has been through the
        model; DeadlineExceededError if the work's deadline passes first, TooMuchWorkError at
        once if its texts alone need more model time than the whole deadline. `trace`, when
        given, is filled in with how the request waited."""
        if not texts:
            return []
        costs = self.costs(texts)
        deadline = work.deadline
        if deadline is not None:
            if deadline.remaining_s() <= 0:
                self._report("shed", work.work_class)
                raise deadline.refusal()
            # Bulk work only, and only when fewer texts would fit: then the batch's size is
            # what makes it too much. An interactive write (one text or a few), or a deadline
            # that not even one text fits, is refused at the deadline (503) if the model is
            # still that slow then: a busy model is a state that passes.
            needed_s = self.model_seconds(costs) if work.work_class is WorkClass.BULK else 0.0
            if needed_s > deadline.budget_ms / 1000 and deadline.fitting(needed_s, len(texts)):
                self._report("shed", work.work_class)
                raise deadline.too_much(needed_s, len(texts))
        queues = self._ensure_dispatcher()
        loop = asyncio.get_running_loop()
        self.arrived(work)
        request: QueuedRequest[T] = QueuedRequest(
            work,
            texts,
            costs,
            loop.create_future(),
            time.monotonic(),
            self.stats.calls,
            trace if trace is not None else Trace(),
        )
        queue = queues.by_class[work.work_class]
        queue.push(request)
        request.future.add_done_callback(lambda _: self._left(queue, request))
        self._report("depth", work.work_class, queue.texts)
        queues.arrived.set()
        expiry = None
        if deadline is not None:
            expiry = loop.call_later(deadline.remaining_s(), self._expire, request)
        try:
            return await request.future
        finally:
            if expiry is not None:
                expiry.cancel()

    def _expire(self, request: QueuedRequest[T]) -> None:
        if not request.future.done():
            assert request.work.deadline is not None
            self._report("shed", request.work.work_class)
            request.future.set_exception(request.work.deadline.refusal())

    def _left(self, queue: ClassQueue[T], request: QueuedRequest[T]) -> None:
        """The request is answered, failed, expired or cancelled: its untaken texts go."""
        if request.untaken:
            if not request.taken:  # never started: its wait ends here
                self._report("waited", request.work.work_class, _since(request.enqueued_at))
            queue.discard(request)
            self._report("depth", request.work.work_class, queue.texts)

    def _report(self, event: str, *args: Any) -> None:
        if self._observer is not None:
            getattr(self._observer, event)(*args)

    def _ensure_dispatcher(self) -> ClassQueues[T]:
        loop = asyncio.get_running_loop()
        if self._loop is not loop or self._dispatcher is None or self._dispatcher.done():
            # A new event loop (a CLI command, a test session) gets its own queues and task.
            self._loop = loop
            self._queues = ClassQueues()
            self._dispatcher = loop.create_task(self._dispatch(self._queues))
        assert self._queues is not None
        return self._queues

    async def _dispatch(self, queues: ClassQueues[T]) -> None:
        loop = asyncio.get_running_loop()
        while True:
            while not queues.texts:
                queues.arrived.clear()
                await queues.arrived.wait()
            # Wait up to max_wait_s for more texts, unless a full call is already waiting.
            linger_until = loop.time() + self._max_wait_s
            while queues.texts < self._max_batch:
                remaining = linger_until - loop.time()
                if remaining <= 0:
                    break
                queues.arrived.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(queues.arrived.wait(), remaining)
            batch = self._take(queues)
            if batch:
                await self._run(batch)

    def _take(self, queues: ClassQueues[T]) -> list[tuple[QueuedRequest[T], int]]:
        """Texts from the head of the classes, most urgent class first, until the call holds
        max_batch texts; bulk and background texts also stop at the call's time budget (the
        last one may go past it), and background texts go only into a call nobody else's
        texts are in."""
        batch: list[tuple[QueuedRequest[T], int]] = []
        cost = 0
        for work_class, queue in queues.by_class.items():
            if work_class is WorkClass.BACKGROUND and batch:
                break
            before = len(batch)
            # Splitting a query's or a write's texts would only delay them: only bulk and
            # background texts stop at the budget, which exists so they never hold the model long.
            limit = self.call_budget(work_class)
            while (
                len(batch) < self._max_batch and cost < limit and (item := queue.pop()) is not None
            ):
                request, position = item
                cost += request.costs[position]
                if request.taken == 1:  # its first text: the request starts now
                    queued_s = _since(request.enqueued_at)
                    request.trace.queued_s = queued_s
                    request.trace.waited_calls = self.stats.calls - request.calls_at_arrival
                    self.stats.waits[request.work.work_class].add(request.trace.waited_calls)
                    self._report("waited", work_class, queued_s)
                batch.append(item)
            if len(batch) > before:
                self._report("depth", work_class, queue.texts)
        return batch

    async def _run(self, batch: list[tuple[QueuedRequest[T], int]]) -> None:
        # The local encoders sort a call's texts by length themselves (sentence-transformers,
        # app/ml/onnx_encoder.py): no second sort here.
        texts = [request.texts[position] for request, position in batch]
        started = time.monotonic()
        try:
            outputs = await anyio.to_thread.run_sync(self._encode, texts)
        except Exception as exc:
            for request, _ in batch:
                if not request.future.done():
                    request.future.set_exception(exc)
            return
        seconds = _since(started)
        self.stats.calls += 1
        self.stats.texts += len(texts)
        self._learn(sum(request.costs[position] for request, position in batch), seconds)
        self._report("batch", len(texts), seconds)
        for (request, position), output in zip(batch, outputs, strict=True):
            if request.future.done():
                continue
            request.results[position] = output
            request.answered += 1
            if request.answered == len(request.texts):
                request.future.set_result(request.results)


def _since(started: float) -> float:
    return max(0.0, time.monotonic() - started)
