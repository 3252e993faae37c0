"""Fair queuing of the texts waiting for the model, one queue per scheduling class.

Within a class the model is shared fairly between tenants, and within a tenant between users,
by start-time fair queuing (the idea behind Linux's CFS): the next text comes from the waiting
tenant (then user) that has been served the least model time so far, and a tenant that starts
waiting joins at the level of the one served last, so idle time earns no credit. A text is
charged its cost (app/ml/scheduling/speed.py). A request is taken a text at a time, so a batch
of 100 never holds the model for more than one call: an interactive text that arrives meanwhile
goes into the next call, ahead of the rest of the batch.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from app.ml.scheduling.work import Trace, Work, WorkClass

T = TypeVar("T")


@dataclass(eq=False)
class QueuedRequest(Generic[T]):
    """One caller's texts in the queue: their costs, the future its caller awaits, and how
    far the dispatcher has taken and answered them."""

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


class FairShare:
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


class ClassQueue(Generic[T]):
    """The waiting requests of one class, per tenant and user, shared fairly."""

    def __init__(self) -> None:
        self.texts = 0  # untaken texts of requests still waiting for their answer
        self._tenants = FairShare()
        self._users: dict[Hashable, FairShare] = {}
        self._waiting: dict[tuple[Hashable, Hashable], deque[QueuedRequest[T]]] = {}

    def push(self, request: QueuedRequest[T]) -> None:
        tenant, user = request.work.tenant, request.work.user
        requests = self._waiting.get((tenant, user))
        if requests is None:
            requests = self._waiting[(tenant, user)] = deque()
            self._tenants.join(tenant)
            self._users.setdefault(tenant, FairShare()).join(user)
        requests.append(request)
        self.texts += len(request.texts)

    def discard(self, request: QueuedRequest[T]) -> None:
        """The request's untaken texts are not wanted any more (it is answered, failed, expired
        or cancelled); its entry leaves the structure when it comes up."""
        self.texts -= request.untaken
        request.taken = len(request.texts)

    def pop(self) -> tuple[QueuedRequest[T], int] | None:
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


class ClassQueues(Generic[T]):
    """One event loop's queues, one per class, and the event that says texts arrived."""

    def __init__(self) -> None:
        self.by_class: dict[WorkClass, ClassQueue[T]] = {c: ClassQueue() for c in WorkClass}
        self.arrived = asyncio.Event()

    @property
    def texts(self) -> int:
        return sum(q.texts for q in self.by_class.values())
