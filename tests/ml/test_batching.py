"""The micro-batcher: concurrent texts share model calls; queries, then interactive writes,
then bulk work; fair shares between tenants and then users; bulk requests yield between
model calls; deadlines shed queued work; errors reach the callers of the failed call only.

The model here is a plain function that records its calls. Where order matters, the model is
held inside a first call (a threading.Event) while the test queues the rest: every later call
is then formed from a known queue, so the assertions hold whatever the machine's speed."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections import Counter
from collections.abc import Sequence

import numpy as np
import pytest

from app.errors import DeadlineExceededError, TooMuchWorkError
from app.ml.embedder import Embedder
from app.ml.scheduling.dispatcher import MicroBatcher
from app.ml.scheduling.speed import BUDGET_WINDOW_S, SPEED_WINDOW
from app.ml.scheduling.work import Deadline, Trace, Work, WorkClass

QUERY, INTERACTIVE, BULK = WorkClass.QUERY, WorkClass.INTERACTIVE, WorkClass.BULK
TENANT_A, TENANT_B = uuid.UUID(int=1), uuid.UUID(int=2)
WRITE = Work(INTERACTIVE)


class RecordingModel:
    """Stands in for a model: returns each text's length, records every call's texts. With
    `hold`, the first call waits until the test calls `release()`."""

    def __init__(self, fail_on: str | None = None, hold: bool = False) -> None:
        self.calls: list[list[str]] = []
        self.fail_on = fail_on
        self.started = threading.Event()
        self._released = threading.Event()
        if not hold:
            self._released.set()

    def __call__(self, texts: list[str]) -> list[int]:
        self.calls.append(list(texts))
        self.started.set()
        self._released.wait(30)
        if self.fail_on is not None and self.fail_on in texts:
            raise RuntimeError(f"model failed on {self.fail_on!r}")
        return [len(t) for t in texts]

    def release(self) -> None:
        self._released.set()


class RecordingObserver:
    def __init__(self) -> None:
        self.batches: list[int] = []
        self.waits: list[WorkClass] = []
        self.depths: dict[WorkClass, int] = {}
        self.sheds: list[WorkClass] = []

    def batch(self, texts: int, seconds: float) -> None:
        self.batches.append(texts)

    def waited(self, work_class: WorkClass, seconds: float) -> None:
        assert seconds >= 0
        self.waits.append(work_class)

    def depth(self, work_class: WorkClass, texts: int) -> None:
        self.depths[work_class] = texts

    def shed(self, work_class: WorkClass) -> None:
        self.sheds.append(work_class)


async def hold_model(batcher: MicroBatcher, model: RecordingModel) -> asyncio.Task:
    """Start a first call and wait until the model is inside it (and held there)."""
    first = asyncio.create_task(batcher.submit(["hold"], Work(QUERY)))
    await asyncio.to_thread(model.started.wait, 5)
    return first


async def queue(batcher: MicroBatcher, texts: list[str], work: Work) -> asyncio.Task:
    """Submit in a task; one turn of the loop lets it reach the queue (submit queues its
    texts before its first await)."""
    task = asyncio.create_task(batcher.submit(texts, work))
    await asyncio.sleep(0)
    return task


def owners(call: list[str]) -> list[str]:
    """The owner prefix of each text in a call ("a1:3" -> "a1")."""
    return [t.split(":")[0] for t in call]


async def test_concurrent_requests_share_one_model_call() -> None:
    model = RecordingModel()
    batcher = MicroBatcher(model, max_batch=32, max_wait_s=0.05)

    texts = [["a" * i] for i in range(1, 9)]
    results = await asyncio.gather(*(batcher.submit(t, WRITE) for t in texts))

    assert results == [[i] for i in range(1, 9)]  # every caller gets its own text's output
    assert len(model.calls) == 1 and len(model.calls[0]) == 8
    assert batcher.stats.calls == 1 and batcher.stats.texts == 8


async def test_outputs_keep_input_order_although_the_batch_is_sorted_by_length() -> None:
    model = RecordingModel()
    batcher = MicroBatcher(model, max_batch=32, max_wait_s=0.0)
    texts = ["ccc", "a", "bbbbb", "dd"]

    assert await batcher.submit(texts, WRITE) == [3, 1, 5, 2]
    assert model.calls == [["a", "dd", "ccc", "bbbbb"]]  # shortest first, less padding


async def test_a_large_request_is_split_into_batches_of_similar_length() -> None:
    model = RecordingModel()
    batcher = MicroBatcher(model, max_batch=4, max_wait_s=0.0)
    lengths = [5, 1, 9, 3, 7, 2, 10, 4, 8, 6]

    result = await batcher.submit(["x" * n for n in lengths], Work(BULK))

    assert result == lengths  # back in the caller's order
    # Sorted before splitting: each model call pads to a near neighbour, not the longest text.
    assert [sorted(len(t) for t in call) for call in model.calls] == [
        [1, 2, 3, 4],
        [5, 6, 7, 8],
        [9, 10],
    ]


async def test_calls_take_queries_then_interactive_writes_then_bulk_work() -> None:
    model = RecordingModel(hold=True)
    batcher = MicroBatcher(model, max_batch=3, max_wait_s=0.0)
    first = await hold_model(batcher, model)

    # Queued least urgent first: arrival order must not decide.
    bulk = await queue(batcher, [f"b:{i}" for i in range(4)], Work(BULK))
    interactive = await queue(batcher, ["i:0", "i:1"], WRITE)
    query = await queue(batcher, ["q:0"], Work(QUERY))
    model.release()
    await asyncio.gather(first, bulk, interactive, query)

    assert [owners(call) for call in model.calls[1:]] == [
        ["q", "i", "i"],
        ["b", "b", "b"],
        ["b"],
    ]


async def test_bulk_work_yields_to_an_interactive_write_between_model_calls() -> None:
    model = RecordingModel(hold=True)
    batcher = MicroBatcher(model, max_batch=4, max_wait_s=0.0)

    # A batch of 10: the model is held inside its first call of 4.
    bulk = asyncio.create_task(batcher.submit([f"b:{i}" for i in range(10)], Work(BULK)))
    await asyncio.to_thread(model.started.wait, 5)
    assert model.calls == [["b:0", "b:1", "b:2", "b:3"]]
    write = await queue(batcher, ["i:0"], WRITE)
    model.release()
    assert await write == [3]
    await bulk

    # The write went into the very next call, ahead of the batch's remaining 6 texts.
    assert owners(model.calls[1]) == ["i", "b", "b", "b"]
    assert [len(c) for c in model.calls] == [4, 4, 3]


# 12 short texts, then 3 long ones: 1,500 characters in all.
MIXED_LENGTHS = ["s" * 50] * 12 + ["l" * 300] * 3


def _budgeted(model: RecordingModel, monkeypatch: pytest.MonkeyPatch) -> MicroBatcher:
    """A batcher with a 0.5 s call budget and the model's learnt speed fixed at 1 ms a
    character (so the budget is 500 characters), whatever the calls take, with interactive
    work just seen (the budget's window open)."""
    batcher = MicroBatcher(model, max_batch=32, max_wait_s=0.0, max_call_s=0.5)
    batcher.seconds_per_unit = 0.001
    batcher.interactive_seen_at = time.monotonic()
    monkeypatch.setattr(batcher, "_learn", lambda cost, seconds: None)
    return batcher


async def test_a_call_stops_at_its_time_budget_so_long_texts_go_few_at_a_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    model = RecordingModel()
    batcher = _budgeted(model, monkeypatch)

    await batcher.submit(MIXED_LENGTHS, Work(BULK))

    # Short texts share a call up to the budget; a call goes past it by its last text only.
    assert [[len(t) for t in call] for call in model.calls] == [
        [50] * 10,
        [50, 50, 300, 300],
        [300],
    ]


async def test_the_time_budget_never_splits_an_interactive_write(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    model = RecordingModel()
    batcher = _budgeted(model, monkeypatch)

    # A batch of messages applied in one transaction: one model call, whatever its length.
    await batcher.submit(MIXED_LENGTHS, WRITE)

    assert [len(call) for call in model.calls] == [15]


async def test_without_a_time_budget_a_call_is_bounded_by_its_texts_only() -> None:
    model = RecordingModel()
    batcher = MicroBatcher(model, max_batch=32, max_wait_s=0.0)
    batcher.seconds_per_unit = 0.001

    await batcher.submit(MIXED_LENGTHS, Work(BULK))

    assert [len(call) for call in model.calls] == [15]


async def test_bulk_work_alone_runs_in_full_calls_until_interactive_work_comes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    model = RecordingModel()
    batcher = _budgeted(model, monkeypatch)
    batcher.interactive_seen_at = None  # an import alone: small calls would only slow it

    await batcher.submit(MIXED_LENGTHS, Work(BULK))
    assert [len(call) for call in model.calls] == [15]

    await batcher.submit(["i"], WRITE)  # a write: from now on, bulk calls stay short
    model.calls.clear()
    await batcher.submit(MIXED_LENGTHS, Work(BULK))
    assert [len(call) for call in model.calls] == [10, 4, 1]

    # The window closes BUDGET_WINDOW_S after the last interactive text.
    assert batcher.interactive_seen_at is not None
    batcher.interactive_seen_at -= BUDGET_WINDOW_S + 1
    model.calls.clear()
    await batcher.submit(MIXED_LENGTHS, Work(BULK))
    assert [len(call) for call in model.calls] == [15]


def test_the_speed_is_the_models_own_the_quick_end_of_recent_calls() -> None:
    batcher = MicroBatcher(RecordingModel(), max_call_s=0.5)
    batcher.interactive_seen_at = time.monotonic()
    assert batcher.call_budget() == float("inf")  # nothing learnt yet: no bound
    batcher._learn(50, 0.5)  # a short call: its fixed cost, not the model's speed
    assert batcher.seconds_per_unit is None

    batcher._learn(1000, 1.0)  # 1 ms a character
    assert batcher.call_budget() == pytest.approx(500)
    # Calls slowed by contention (other processes on the cores) do not make the model slower:
    # planning with their mean refused batches an idle model does in time.
    for _ in range(3):
        batcher._learn(1000, 3.0)
    assert batcher.seconds_per_unit == pytest.approx(0.001)
    # A real change (the model is slower now on every call) is followed within the window.
    for _ in range(SPEED_WINDOW):
        batcher._learn(1000, 2.0)
    assert batcher.seconds_per_unit == pytest.approx(0.002)
    assert batcher.call_budget() == pytest.approx(250)


async def test_costs_are_counted_as_the_batcher_is_told_and_once_per_text() -> None:
    """The embedding server counts a text's model time in the model's tokens."""
    counted: list[list[str]] = []

    def words(texts: Sequence[str]) -> list[int]:
        counted.append(list(texts))
        return [len(t.split()) for t in texts]

    batcher = MicroBatcher(RecordingModel(), max_batch=2, max_wait_s=0.0, costs=words)
    batcher.seconds_per_unit = 1.0  # a second a word
    with pytest.raises(TooMuchWorkError) as refused:
        await batcher.submit(["a b c", "d e"], Work(BULK, deadline=Deadline.after_ms(2_500)))
    assert refused.value.extra["needed_ms"] == 5_000  # 5 words, not 9 characters
    assert await batcher.submit(["a b", "c", "d e f"], Work(BULK)) == [3, 1, 5]
    assert counted[-1] == ["a b", "c", "d e f"] and len(counted) == 2


async def test_background_work_runs_only_when_nothing_else_waits() -> None:
    model = RecordingModel(hold=True)
    batcher = MicroBatcher(model, max_batch=8, max_wait_s=0.0)
    first = await hold_model(batcher, model)

    background = await queue(batcher, ["s1", "s2"], Work(WorkClass.BACKGROUND))
    bulk = await queue(batcher, ["b1"], Work(BULK))
    model.release()
    await asyncio.gather(first, background, bulk)

    # Room for all three in one call, but the background texts wait for a call of their own.
    assert model.calls[1:] == [["b1"], ["s1", "s2"]]
    assert Work(WorkClass.BACKGROUND).background and not Work(BULK).background


async def test_a_trace_counts_the_calls_a_request_waited_for() -> None:
    model = RecordingModel(hold=True)
    batcher = MicroBatcher(model, max_batch=2, max_wait_s=0.0)
    first = await hold_model(batcher, model)

    bulk_trace, query_trace = Trace(), Trace()
    bulk = asyncio.create_task(batcher.submit(["b1", "b2", "b3", "b4"], Work(BULK), bulk_trace))
    await asyncio.sleep(0)
    query = asyncio.create_task(batcher.submit(["q"], Work(QUERY), query_trace))
    await asyncio.sleep(0)
    model.release()
    await asyncio.gather(first, bulk, query)

    # The query waited for the call already running only; the bulk request's first text went
    # into that same next call (room for two), so it too waited for one.
    assert model.calls[1] == ["q", "b1"]
    assert query_trace.waited_calls == 1 and bulk_trace.waited_calls == 1
    assert query_trace.queued_s >= 0


async def test_tenants_share_a_class_fairly_whoever_came_first() -> None:
    model = RecordingModel(hold=True)
    batcher = MicroBatcher(model, max_batch=4, max_wait_s=0.0)
    first = await hold_model(batcher, model)

    # Tenant A's large import is queued first; B's arrives behind all of it.
    a = await queue(batcher, [f"a:{i:02}" for i in range(40)], Work(BULK, TENANT_A, "u"))
    b = await queue(batcher, [f"b:{i:02}" for i in range(4)], Work(BULK, TENANT_B, "u"))
    model.release()
    await asyncio.gather(first, a, b)

    # B is served alongside A from the next call on, text for text, not after A's 40.
    assert [Counter(owners(call)) for call in model.calls[1:3]] == [Counter(a=2, b=2)] * 2
    assert all(owners(call) == ["a"] * 4 for call in model.calls[3:])


async def test_fair_shares_count_characters_not_texts() -> None:
    model = RecordingModel(hold=True)
    batcher = MicroBatcher(model, max_batch=6, max_wait_s=0.0)
    first = await hold_model(batcher, model)

    # A's texts are twice as long as B's: each gets the same number of characters per call.
    a = await queue(batcher, [f"a:{i}" + "x" * 17 for i in range(10)], Work(BULK, TENANT_A))
    b = await queue(batcher, [f"b:{i}" + "x" * 7 for i in range(20)], Work(BULK, TENANT_B))
    model.release()
    await asyncio.gather(first, a, b)

    assert [Counter(owners(call)) for call in model.calls[1:4]] == [Counter(a=2, b=4)] * 3


async def test_within_a_tenant_its_users_share_its_part() -> None:
    model = RecordingModel(hold=True)
    batcher = MicroBatcher(model, max_batch=4, max_wait_s=0.0)
    first = await hold_model(batcher, model)

    a1 = await queue(batcher, [f"a1:{i}" for i in range(8)], Work(INTERACTIVE, TENANT_A, "u1"))
    a2 = await queue(batcher, [f"a2:{i}" for i in range(8)], Work(INTERACTIVE, TENANT_A, "u2"))
    b = await queue(batcher, [f"b:{i}" for i in range(8)], Work(INTERACTIVE, TENANT_B, "u1"))
    model.release()
    await asyncio.gather(first, a1, a2, b)

    # Tenants first (a tenant with two busy users does not get two shares), then users.
    assert [Counter(owners(call)) for call in model.calls[1:3]] == [Counter(a1=1, a2=1, b=2)] * 2


async def test_queue_depth_and_wait_are_reported_per_class() -> None:
    model = RecordingModel(hold=True)
    observer = RecordingObserver()
    batcher = MicroBatcher(model, max_batch=4, max_wait_s=0.0, observer=observer)
    first = await hold_model(batcher, model)
    assert observer.waits == [QUERY] and observer.batches == []

    bulk = await queue(batcher, [f"b:{i}" for i in range(6)], Work(BULK))
    write = await queue(batcher, ["i:0", "i:1"], WRITE)
    assert observer.depths == {QUERY: 0, BULK: 6, INTERACTIVE: 2}
    assert batcher.queued(BULK) == 6 and batcher.queued(INTERACTIVE) == 2

    model.release()
    await asyncio.gather(first, bulk, write)

    assert observer.depths == {QUERY: 0, BULK: 0, INTERACTIVE: 0}
    assert observer.batches == [1, 4, 4]
    # One wait per request, when its first text went in.
    assert observer.waits == [QUERY, INTERACTIVE, BULK]


async def test_a_write_past_its_deadline_leaves_the_queue_unembedded() -> None:
    model = RecordingModel(hold=True)
    observer = RecordingObserver()
    batcher = MicroBatcher(model, max_batch=4, max_wait_s=0.0, observer=observer)
    first = await hold_model(batcher, model)

    late = Work(INTERACTIVE, TENANT_A, "u", Deadline.after_ms(20))
    with pytest.raises(DeadlineExceededError) as refused:
        # The model is held until after this returns: the texts cannot have started in time.
        await batcher.submit(["late:0", "late:1"], late)
    assert refused.value.status_code == 503 and refused.value.extra["deadline_ms"] == 20
    assert batcher.queued(INTERACTIVE) == 0 and observer.depths[INTERACTIVE] == 0
    assert observer.sheds == [INTERACTIVE] and observer.waits == [QUERY, INTERACTIVE]

    model.release()
    await first
    assert await batcher.submit(["next"], WRITE) == [4]
    assert all("late" not in t for call in model.calls for t in call)


async def test_an_expired_deadline_is_refused_before_queueing() -> None:
    model = RecordingModel()
    observer = RecordingObserver()
    batcher = MicroBatcher(model, max_batch=4, max_wait_s=0.0, observer=observer)

    with pytest.raises(DeadlineExceededError):
        await batcher.submit(["late"], Work(BULK, deadline=Deadline.after_ms(-1)))
    assert model.calls == [] and observer.sheds == [BULK]


async def test_work_longer_than_its_whole_deadline_is_refused_before_any_model_call() -> None:
    model = RecordingModel()
    observer = RecordingObserver()
    batcher = MicroBatcher(model, max_batch=4, max_wait_s=0.0, observer=observer)
    batch = ["t" * 1000] * 10  # 10,000 characters

    # Nothing learnt yet: no estimate, so the batch is tried.
    assert (
        await batcher.submit(batch, Work(BULK, deadline=Deadline.after_ms(60_000))) == [1000] * 10
    )
    model.calls.clear()

    batcher.seconds_per_unit = 0.001  # 1 s a text: 10 s for the batch, 4 s allowed
    with pytest.raises(TooMuchWorkError) as refused:
        await batcher.submit(batch, Work(BULK, deadline=Deadline.after_ms(4_000)))
    error = refused.value
    assert error.status_code == 413
    assert error.extra == {"deadline_ms": 4_000, "needed_ms": 10_000, "fitting_texts": 4}
    assert "at most 4 texts" in error.detail and "nothing was written" in error.detail
    assert model.calls == [] and observer.sheds == [BULK] and batcher.queued(BULK) == 0

    # Not even one text fits: not a matter of size (503 at the deadline if still too slow).
    tight = Work(BULK, deadline=Deadline.after_ms(500))
    assert len(await batcher.submit(batch[:2], tight)) == 2
    # What fits the deadline is done; interactive work is never refused for its size.
    assert len(await batcher.submit(batch[:4], Work(BULK, deadline=Deadline.after_ms(4_500)))) == 4
    write = Work(INTERACTIVE, deadline=Deadline.after_ms(4_000))
    assert len(await batcher.submit(batch, write)) == 10


async def test_a_caller_that_goes_away_leaves_the_queue() -> None:
    model = RecordingModel(hold=True)
    batcher = MicroBatcher(model, max_batch=4, max_wait_s=0.0)
    first = await hold_model(batcher, model)

    gone = await queue(batcher, [f"gone:{i}" for i in range(5)], Work(BULK))
    assert batcher.queued(BULK) == 5
    gone.cancel()
    await asyncio.sleep(0)
    assert batcher.queued(BULK) == 0

    model.release()
    await first
    assert await batcher.submit(["next"], Work(BULK)) == [4]
    assert all("gone" not in t for call in model.calls for t in call)


async def test_a_failed_batch_fails_its_callers_and_the_batcher_goes_on() -> None:
    model = RecordingModel(fail_on="bad")
    batcher = MicroBatcher(model, max_batch=8, max_wait_s=0.0)

    with pytest.raises(RuntimeError, match="model failed"):
        await batcher.submit(["bad"], WRITE)
    assert await batcher.submit(["good"], WRITE) == [4]


async def test_the_real_model_gives_the_same_vectors_batched_or_alone(model_path: str) -> None:
    embedder = Embedder(model_path, batch_size=16, batch_wait_ms=50)
    texts = ["I live in Tokyo", "My favourite colour is blue", "ok", "I went hiking yesterday"]
    alone = [embedder.embed_sync([t])[0] for t in texts]
    calls_before = embedder.batcher.stats.calls

    together = await asyncio.gather(*(embedder.embed([t], WRITE) for t in texts))

    assert embedder.batcher.stats.calls == calls_before + 1
    for (batched,), single in zip(together, alone, strict=True):
        assert float(np.dot(batched.full, single.full)) > 0.9999
