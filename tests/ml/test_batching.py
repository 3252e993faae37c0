"""The micro-batcher: concurrent texts share model calls, queries go first, errors reach the
callers of the failed batch only. The model here is a plain function that records its calls."""

from __future__ import annotations

import asyncio
import threading
import time

import numpy as np
import pytest

from app.ml.batching import MicroBatcher, Priority
from app.ml.embedder import Embedder


class RecordingModel:
    """Stands in for a model: returns each text's length, records every call's texts."""

    def __init__(self, delay_s: float = 0.0, fail_on: str | None = None) -> None:
        self.calls: list[list[str]] = []
        self.delay_s = delay_s
        self.fail_on = fail_on
        self.started = threading.Event()

    def __call__(self, texts: list[str]) -> list[int]:
        self.calls.append(list(texts))
        self.started.set()
        time.sleep(self.delay_s)
        if self.fail_on is not None and self.fail_on in texts:
            raise RuntimeError(f"model failed on {self.fail_on!r}")
        return [len(t) for t in texts]


async def test_concurrent_requests_share_one_model_call() -> None:
    model = RecordingModel()
    batcher = MicroBatcher(model, max_batch=32, max_wait_s=0.05)

    texts = [["a" * i] for i in range(1, 9)]
    results = await asyncio.gather(*(batcher.submit(t) for t in texts))

    assert results == [[i] for i in range(1, 9)]  # every caller gets its own text's output
    assert len(model.calls) == 1 and len(model.calls[0]) == 8
    assert batcher.stats.calls == 1 and batcher.stats.texts == 8


async def test_outputs_keep_input_order_although_the_batch_is_sorted_by_length() -> None:
    model = RecordingModel()
    batcher = MicroBatcher(model, max_batch=32, max_wait_s=0.0)
    texts = ["ccc", "a", "bbbbb", "dd"]

    assert await batcher.submit(texts) == [3, 1, 5, 2]
    assert model.calls == [["a", "dd", "ccc", "bbbbb"]]  # shortest first, less padding


async def test_a_large_request_is_split_into_batches_of_similar_length() -> None:
    model = RecordingModel()
    batcher = MicroBatcher(model, max_batch=4, max_wait_s=0.0)
    lengths = [5, 1, 9, 3, 7, 2, 10, 4, 8, 6]

    result = await batcher.submit(["x" * n for n in lengths])

    assert result == lengths  # back in the caller's order
    # Sorted before splitting: each model call pads to a near neighbour, not the longest text.
    assert [sorted(len(t) for t in call) for call in model.calls] == [
        [1, 2, 3, 4],
        [5, 6, 7, 8],
        [9, 10],
    ]


async def test_a_query_jumps_the_write_backlog() -> None:
    model = RecordingModel(delay_s=0.2)
    batcher = MicroBatcher(model, max_batch=2, max_wait_s=0.0)

    first = asyncio.create_task(batcher.submit(["w0"]))
    await asyncio.to_thread(model.started.wait, 5)  # the model is busy with the first batch
    writes = [asyncio.create_task(batcher.submit([f"w{i}"])) for i in range(1, 5)]
    await asyncio.sleep(0.01)
    query = asyncio.create_task(batcher.submit(["query"], Priority.QUERY))
    await asyncio.gather(first, query, *writes)

    # The query arrived after four writes but ran in the very next model call.
    assert model.calls[0] == ["w0"]
    assert "query" in model.calls[1]
    assert sum(len(c) for c in model.calls) == 6


async def test_a_failed_batch_fails_its_callers_and_the_batcher_goes_on() -> None:
    model = RecordingModel(fail_on="bad")
    batcher = MicroBatcher(model, max_batch=8, max_wait_s=0.0)

    with pytest.raises(RuntimeError, match="model failed"):
        await batcher.submit(["bad"])
    assert await batcher.submit(["good"]) == [4]


async def test_the_real_model_gives_the_same_vectors_batched_or_alone(model_path: str) -> None:
    embedder = Embedder(model_path, batch_size=16, batch_wait_ms=50)
    texts = ["I live in Tokyo", "My favourite colour is blue", "ok", "I went hiking yesterday"]
    alone = [embedder.embed_sync([t])[0] for t in texts]
    calls_before = embedder.batcher.stats.calls

    together = await asyncio.gather(*(embedder.embed([t]) for t in texts))

    assert embedder.batcher.stats.calls == calls_before + 1
    for (batched,), single in zip(together, alone, strict=True):
        assert float(np.dot(batched.full, single.full)) > 0.9999
