"""Dynamic micro-batching for one embedding model.

Texts from concurrent callers (API requests, ingestion workers, imports) are gathered for at
most `max_wait_s`, or until `max_batch` texts are waiting, and run as one model call: on a CPU
a batch of 16 costs far less than 16 calls of one. Queries jump the queue: when a batch is
formed, waiting query texts go first, so a search waits at most for the model call already
running, never for the write backlog.

One dispatcher task per event loop feeds the model one batch at a time from a worker thread;
the model itself is never called concurrently.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Generic, TypeVar

import anyio

T = TypeVar("T")


class Priority(IntEnum):
    """Lower runs first."""

    QUERY = 0
    WRITE = 1


@dataclass(order=True)
class _Request(Generic[T]):
    priority: int
    seq: int
    texts: list[str] = field(compare=False)
    future: asyncio.Future[list[T]] = field(compare=False)


@dataclass
class BatchStats:
    """What the batcher did: model calls and texts."""

    calls: int = 0
    texts: int = 0


class MicroBatcher(Generic[T]):
    def __init__(
        self,
        encode: Callable[[list[str]], Sequence[T]],
        max_batch: int = 32,
        max_wait_s: float = 0.005,
        on_batch: Callable[[int, float], None] | None = None,
    ) -> None:
        if max_batch < 1:
            raise ValueError("max_batch must be at least 1")
        self._encode = encode
        self._max_batch = max_batch
        self._max_wait_s = max_wait_s
        self._on_batch = on_batch
        self._seq = itertools.count()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._queue: asyncio.PriorityQueue[_Request[T]] | None = None
        self._dispatcher: asyncio.Task[None] | None = None
        self._arrived = asyncio.Event()
        self.stats = BatchStats()

    async def submit(self, texts: list[str], priority: Priority = Priority.WRITE) -> list[T]:
        """The model's output for each text, in order. Large requests are split into pieces of
        `max_batch`, so one import never holds the model longer than one batch."""
        if not texts:
            return []
        queue = self._ensure_dispatcher()
        loop = asyncio.get_running_loop()
        # Pieces of similar length: a large request sorted before it is split pads far less.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        futures = []
        for start in range(0, len(texts), self._max_batch):
            future: asyncio.Future[list[T]] = loop.create_future()
            chunk = [texts[i] for i in order[start : start + self._max_batch]]
            queue.put_nowait(_Request(int(priority), next(self._seq), chunk, future))
            futures.append(future)
        self._arrived.set()
        outputs = [item for chunk in await asyncio.gather(*futures) for item in chunk]
        results: list[T | None] = [None] * len(texts)
        for position, i in enumerate(order):
            results[i] = outputs[position]
        return results  # type: ignore[return-value]

    def _ensure_dispatcher(self) -> asyncio.PriorityQueue[_Request[T]]:
        loop = asyncio.get_running_loop()
        if self._loop is not loop or self._dispatcher is None or self._dispatcher.done():
            # A new event loop (a CLI command, a test session) gets its own queue and task.
            self._loop = loop
            self._queue = asyncio.PriorityQueue()
            self._arrived = asyncio.Event()
            self._dispatcher = loop.create_task(self._dispatch(self._queue))
        assert self._queue is not None
        return self._queue

    async def _dispatch(self, queue: asyncio.PriorityQueue[_Request[T]]) -> None:
        while True:
            first = await queue.get()
            batch = await self._gather(queue, first)
            if batch:
                await self._run(batch)

    async def _gather(
        self, queue: asyncio.PriorityQueue[_Request[T]], first: _Request[T]
    ) -> list[_Request[T]]:
        """Wait up to max_wait_s for more texts, then take the most urgent that fit."""
        waiting = [first]
        deadline = asyncio.get_running_loop().time() + self._max_wait_s
        while True:
            while not queue.empty():
                waiting.append(queue.get_nowait())
            remaining = deadline - asyncio.get_running_loop().time()
            if sum(len(r.texts) for r in waiting) >= self._max_batch or remaining <= 0:
                break
            self._arrived.clear()
            # Waiting on an event, not on queue.get(): a timed-out get may drop an item.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._arrived.wait(), remaining)
        waiting.sort()
        batch: list[_Request[T]] = []
        size = 0
        for request in waiting:
            if request.future.cancelled():
                continue
            if batch and size + len(request.texts) > self._max_batch:
                queue.put_nowait(request)  # back in line, keeping its place by seq
                continue
            batch.append(request)
            size += len(request.texts)
        return batch

    async def _run(self, batch: list[_Request[T]]) -> None:
        # The local encoders sort a call's texts by length themselves (sentence-transformers,
        # app/ml/onnx_encoder.py): no second sort here.
        texts = [text for request in batch for text in request.texts]
        loop = asyncio.get_running_loop()
        started = loop.time()
        try:
            outputs = await anyio.to_thread.run_sync(self._encode, texts)
        except Exception as exc:
            for request in batch:
                if not request.future.done():
                    request.future.set_exception(exc)
            return
        elapsed = loop.time() - started
        self.stats.calls += 1
        self.stats.texts += len(texts)
        if self._on_batch is not None:
            self._on_batch(len(texts), elapsed)
        offset = 0
        for request in batch:
            chunk = list(outputs[offset : offset + len(request.texts)])
            offset += len(request.texts)
            if not request.future.done():
                request.future.set_result(chunk)
