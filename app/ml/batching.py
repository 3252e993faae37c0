"""Dynamic micro-batching for one embedding model, with scheduling classes and fair shares.

Texts from concurrent callers (API requests, ingestion workers, imports) are gathered for at
most `max_wait_s`, or until `max_batch` texts are waiting, and run as one model call: on a CPU
a batch of 16 costs far less than 16 calls of one.

Every request says whose work it is (`Work`: a scheduling class, a tenant, a user). A model
call is formed text by text from the head of the classes, most urgent first:

- QUERY: searches. They wait at most for the model call already running.
- INTERACTIVE: single writes (a memory, a PATCH, a message, its ingestion).
- BULK: batch creates, imports, re-embedding.
- BACKGROUND: work the service does for itself (sentence vectors, backfills): a call is formed
  from it only when no text of any other class waits, so it never delays anyone's work by
  more than one short call.

Within a class the model is shared fairly between tenants, and within a tenant between users,
by start-time fair queuing (the idea behind Linux's CFS): the next text comes from the waiting
tenant (then user) that has been served the least model time so far, and a tenant that starts
waiting joins at the level of the one served last, so idle time earns no credit. A text's cost
stands for its model time: its tokens where the batcher is given the model's tokenizer (the
embedding server is), else its characters, capped where models truncate. A request is taken a
text at a time, so a batch of 100 never holds the model for more than one call: an
interactive text that arrives meanwhile goes into the next call, ahead of the rest of the batch.

A call is also bounded in time, not only in texts, while interactive work is about: the batcher
learns the model's seconds per unit of cost from the calls it makes, and stops adding bulk texts
to a call once it is worth `max_call_s` (queries and interactive writes are never split: that
would only delay them). Without it a call of 32 chat-length texts (an import's) held the model
for seconds, and a single write that arrived meanwhile waited for all of it: the model cannot
be interrupted, so the longest call is the longest an interactive text can wait. The bound
holds for `BUDGET_WINDOW_S` after the last interactive or query text arrived; bulk work alone
runs in full calls, which small calls would slow (a call's fixed cost is spread over fewer
texts: LoCoMo turns with their context, 8.1 texts/s in 1 s calls, 9.7 in full ones).

The speed it plans with is the model's own: the quick end (lower quartile) of its recent
calls, not their mean. A call only ever runs slower than the model can (other processes on the
cores, a cold cache), so the mean of contended calls made a batch look several times bigger
than it is, and the batcher refused work an idle model would have done in time.

A request may carry a deadline: if its texts have not all been embedded by then it fails with
DeadlineExceededError and its remaining texts leave the queue (nobody waits for them any more).
A caller that goes away (cancelled) leaves the queue the same way. A bulk request whose texts
alone need more model time than its whole deadline, at the speed the batcher has learnt, is
refused at once with TooMuchWorkError (413) when fewer of its texts would fit: waiting and
retrying could never make it fit, and the answer says how many texts would.

One dispatcher task per event loop feeds the model one call at a time from a worker thread;
the model itself is never called concurrently.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections import deque
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, Generic, Protocol, TypeVar

import anyio
import numpy as np

from app.errors import DeadlineExceededError, TooMuchWorkError

T = TypeVar("T")

# The smallest call (in characters, as text_cost counts them) the batcher learns the model's
# speed from: below it, the call's fixed cost dominates. A token is about four characters.
MIN_LEARN_CHARS = 1000
MIN_LEARN_TOKENS = 250

# The model's speed: the lower quartile of the seconds per unit of the last SPEED_WINDOW calls
# (contention only ever slows a call down).
SPEED_WINDOW = 24
SPEED_QUANTILE = 25

# How long after the last interactive (or query) text bulk calls stay bounded by the call
# budget: while writes come in, each waits for one short call at most; an import alone runs in
# full calls.
BUDGET_WINDOW_S = 30.0

# A text's cost in characters, capped: the models truncate long inputs (all-mpnet-base-v2 at
# 384 word pieces, about 2,000 characters of English), so beyond this a text costs no more.
MAX_TEXT_COST = 2000


class WorkClass(IntEnum):
    """Scheduling classes of model work; lower runs first."""

    QUERY = 0
    INTERACTIVE = 1
    BULK = 2
    BACKGROUND = 3

    @property
    def label(self) -> str:
        return self.name.lower()


@dataclass(frozen=True, slots=True)
class Deadline:
    """When the client stops waiting (time.monotonic() seconds), and the budget it came from."""

    at: float
    budget_ms: int

    @classmethod
    def after_ms(cls, budget_ms: int) -> Deadline:
        return cls(time.monotonic() + budget_ms / 1000, budget_ms)

    def remaining_s(self) -> float:
        return self.at - time.monotonic()

    def refusal(self) -> DeadlineExceededError:
        return DeadlineExceededError(
            f"this write could not be done within its deadline of {self.budget_ms} ms (the "
            "model is busy with other work); nothing was written: send it again after "
            "Retry-After seconds",
            deadline_ms=self.budget_ms,
        )

    def fitting(self, needed_s: float, count: int) -> int:
        """How many of `count` items, needing `needed_s` seconds of model time together, fit
        this whole deadline (at that mean cost an item)."""
        return int(count * self.budget_ms / 1000 / needed_s) if needed_s > 0 else count

    def too_much(self, needed_s: float, count: int, unit: str = "texts") -> TooMuchWorkError:
        """The refusal of `count` items (`unit`: texts for the model, memories for a batch
        create) that need about `needed_s` seconds of model time alone, more than this whole
        deadline: sending them again would fail the same way. It says, in the same unit, how
        many would fit (`fitting_<unit>`)."""
        fitting = self.fitting(needed_s, count)
        return TooMuchWorkError(
            f"these {count} {unit} need about {needed_s:.1f} s of model time at the model's "
            f"own speed, more than this write's whole deadline of {self.budget_ms} ms, so "
            f"sending them again would fail the same way; nothing was written. Send at most "
            f"{fitting} {unit} per request (a client's X-Cognis-Deadline-Ms can only "
            "shorten the server's own deadline), or use POST /v1/users/{user_id}/import, "
            "which has none",
            deadline_ms=self.budget_ms,
            needed_ms=round(needed_s * 1000),
            **{f"fitting_{unit}": fitting},
        )

    def check(self) -> None:
        """Refuse (DeadlineExceededError) once the deadline has passed: called before a write
        starts and before it commits, so nothing is committed after the client stopped
        waiting."""
        if self.remaining_s() <= 0:
            raise self.refusal()


@dataclass(frozen=True, slots=True)
class Work:
    """On whose behalf texts are embedded: the class, the tenant and user shared fairly
    within it, and optionally a deadline."""

    work_class: WorkClass
    tenant: uuid.UUID | None = None
    user: str | None = None
    deadline: Deadline | None = None

    @property
    def background(self) -> bool:
        """Work the service does for itself when the model is idle (sentence vectors): it does
        not count as the model being busy (`MicroBatcher.idle_s`)."""
        return self.work_class is WorkClass.BACKGROUND

    def check_deadline(self) -> None:
        if self.deadline is not None:
            self.deadline.check()


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
class Trace:
    """How a request was served: model calls that finished between its arrival and the call
    that took its first text (at most 1, the call already running, for the most urgent
    class), and the seconds it waited for that call."""

    waited_calls: int = 0
    queued_s: float = 0.0


@dataclass(eq=False)
class _Request(Generic[T]):
    work: Work
    texts: list[str]
    costs: list[int]
    future: asyncio.Future[list[T]]
    enqueued_at: float
    calls_at_arrival: int
    trace: Trace
    # Positions in the order they are taken: shortest first, so a long request's model calls
    # each hold texts of similar length (less padding).
    order: list[int] = field(init=False)
    taken: int = 0
    answered: int = 0
    results: list[Any] = field(init=False)

    def __post_init__(self) -> None:
        self.order = sorted(range(len(self.texts)), key=lambda i: len(self.texts[i]))
        self.results = [None] * len(self.texts)

    @property
    def untaken(self) -> int:
        return len(self.texts) - self.taken


def text_cost(text: str) -> int:
    return max(1, min(len(text), MAX_TEXT_COST))


def character_costs(texts: Sequence[str]) -> list[int]:
    """Each text's cost in characters, capped where models truncate."""
    return [text_cost(t) for t in texts]


class _FairShare:
    """Start-time fair queuing between the waiting flows of one level (tenants of a class, or
    users of a tenant): `next` is the flow served least so far; a flow that joins starts at the
    service of the flow served last, never below it (no credit for idle time)."""

    def __init__(self) -> None:
        self._served: dict[Hashable, float] = {}  # insertion order breaks ties: first come
        self._level = 0.0

    def __bool__(self) -> bool:
        return bool(self._served)

    def join(self, flow: Hashable) -> None:
        self._served.setdefault(flow, self._level)

    def next(self) -> Hashable:
        return min(self._served, key=self._served.__getitem__)

    def charge(self, flow: Hashable, cost: int) -> None:
        self._level = self._served[flow]
        self._served[flow] += cost

    def leave(self, flow: Hashable) -> None:
        del self._served[flow]


class _ClassQueue(Generic[T]):
    """The waiting requests of one class, per tenant and user, shared fairly."""

    def __init__(self) -> None:
        self.texts = 0  # untaken texts of requests still waiting for their answer
        self._tenants = _FairShare()
        self._users: dict[Hashable, _FairShare] = {}
        self._waiting: dict[tuple[Hashable, Hashable], deque[_Request[T]]] = {}

    def push(self, request: _Request[T]) -> None:
        tenant, user = request.work.tenant, request.work.user
        requests = self._waiting.get((tenant, user))
        if requests is None:
            requests = self._waiting[(tenant, user)] = deque()
            self._tenants.join(tenant)
            self._users.setdefault(tenant, _FairShare()).join(user)
        requests.append(request)
        self.texts += len(request.texts)

    def discard(self, request: _Request[T]) -> None:
        """The request's untaken texts are not wanted any more (it is answered, failed, expired
        or cancelled); its entry leaves the structure when it comes up."""
        self.texts -= request.untaken
        request.taken = len(request.texts)

    def pop(self) -> tuple[_Request[T], int] | None:
        """The next text in fair order: its request and position."""
        while self._tenants:
            tenant = self._tenants.next()
            users = self._users[tenant]
            user = users.next()
            requests = self._waiting[(tenant, user)]
            request = requests[0]
            position = None
            if request.untaken:
                position = request.order[request.taken]
                request.taken += 1
                self.texts -= 1
                cost = request.costs[position]
                self._tenants.charge(tenant, cost)
                users.charge(user, cost)
            if not request.untaken:
                requests.popleft()
            if not requests:
                del self._waiting[(tenant, user)]
                users.leave(user)
                if not users:
                    del self._users[tenant]
                    self._tenants.leave(tenant)
            if position is not None:
                return request, position
        return None


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


class _Queues(Generic[T]):
    """One event loop's queues, one per class."""

    def __init__(self) -> None:
        self.by_class: dict[WorkClass, _ClassQueue[T]] = {c: _ClassQueue() for c in WorkClass}
        self.arrived = asyncio.Event()

    @property
    def texts(self) -> int:
        return sum(q.texts for q in self.by_class.values())


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
        # A text's share of model time: characters, or the model's tokens (embed-serve).
        self.costs = costs
        self._min_learn_cost = min_learn_cost
        self._speeds: deque[float] = deque(maxlen=SPEED_WINDOW)
        self._max_batch = max_batch
        self._max_wait_s = max_wait_s
        # 0: calls bounded by max_batch only. Else the model's seconds per unit of cost, learnt
        # from the calls made, turns it into a budget of cost per call.
        self._max_call_s = max_call_s
        self.seconds_per_unit: float | None = None
        # time.monotonic() when interactive (or query) work last arrived: the budget's window.
        self.interactive_seen_at: float | None = None
        self.foreground_seen_at: float | None = None  # the last text of any caller's work
        self._observer = observer
        self._loop: asyncio.AbstractEventLoop | None = None
        self._queues: _Queues[T] | None = None
        self._dispatcher: asyncio.Task[None] | None = None
        self.stats = BatchStats()

    def idle_s(self) -> float:
        """Seconds since any caller but background work last gave the model texts (infinite:
        never, in this process)."""
        seen = self.foreground_seen_at
        return float("inf") if seen is None else time.monotonic() - seen

    def arrived(self, work: Work) -> None:
        """Work has come for the model (here, or through this process to the model service):
        the clocks of `idle_s` and of the call budget's window."""
        if work.work_class < WorkClass.BULK:
            self.interactive_seen_at = time.monotonic()
        if not work.background:
            self.foreground_seen_at = time.monotonic()

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
        request: _Request[T] = _Request(
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

    def _expire(self, request: _Request[T]) -> None:
        if not request.future.done():
            assert request.work.deadline is not None
            self._report("shed", request.work.work_class)
            request.future.set_exception(request.work.deadline.refusal())

    def _left(self, queue: _ClassQueue[T], request: _Request[T]) -> None:
        """The request is answered, failed, expired or cancelled: its untaken texts go."""
        if request.untaken:
            if not request.taken:  # never started: its wait ends here
                self._report("waited", request.work.work_class, _since(request.enqueued_at))
            queue.discard(request)
            self._report("depth", request.work.work_class, queue.texts)

    def _report(self, event: str, *args: Any) -> None:
        if self._observer is not None:
            getattr(self._observer, event)(*args)

    def _ensure_dispatcher(self) -> _Queues[T]:
        loop = asyncio.get_running_loop()
        if self._loop is not loop or self._dispatcher is None or self._dispatcher.done():
            # A new event loop (a CLI command, a test session) gets its own queues and task.
            self._loop = loop
            self._queues = _Queues()
            self._dispatcher = loop.create_task(self._dispatch(self._queues))
        assert self._queues is not None
        return self._queues

    async def _dispatch(self, queues: _Queues[T]) -> None:
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

    def model_seconds(self, costs: Sequence[int]) -> float:
        """The model time texts of these costs need at the speed learnt so far (0 before the
        first call)."""
        return sum(costs) * (self.seconds_per_unit or 0.0)

    def call_budget(self, work_class: WorkClass = WorkClass.BULK) -> float:
        """Cost one call may take before it stops taking more texts of `work_class` (inf: no
        bound: none configured, nothing learnt yet, or no interactive work within the window
        for bulk work; background calls are always bounded, whoever may come)."""
        if work_class < WorkClass.BULK or not self._max_call_s or not self.seconds_per_unit:
            return float("inf")
        seen = self.interactive_seen_at
        window_closed = seen is None or time.monotonic() - seen > BUDGET_WINDOW_S
        if work_class is WorkClass.BULK and window_closed:
            return float("inf")
        return self._max_call_s / self.seconds_per_unit

    def _take(self, queues: _Queues[T]) -> list[tuple[_Request[T], int]]:
        """Texts from the head of the classes, most urgent class first, until the call holds
        max_batch texts; bulk and background texts also stop at the call's time budget (the
        last one may go past it), and background texts go only into a call nobody else's
        texts are in."""
        batch: list[tuple[_Request[T], int]] = []
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

    async def _run(self, batch: list[tuple[_Request[T], int]]) -> None:
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

    def _learn(self, cost: int, seconds: float) -> None:
        """Fold one call's seconds per unit into the model's speed: the lower quartile of the
        last SPEED_WINDOW calls (module docstring), which follows a real change of speed within
        a few calls but not the slowness of a contended one. Calls below `min_learn_cost` teach
        nothing: a call's fixed cost, spread over few characters, made one short query look
        like 10 ms a character, and a batch of 100 short texts then looked like two minutes of
        work."""
        if cost < self._min_learn_cost:
            return
        self._speeds.append(seconds / cost)
        self.seconds_per_unit = float(
            np.percentile(np.fromiter(self._speeds, float), SPEED_QUANTILE, method="lower")
        )


def _since(started: float) -> float:
    return max(0.0, time.monotonic() - started)
