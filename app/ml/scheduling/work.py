"""The scheduler's vocabulary: whose work a text is, how urgent, and until when its caller
waits. Every caller of an embedder says it with a `Work`.

Scheduling classes, most urgent first:

- QUERY: searches. They wait at most for the model call already running.
- INTERACTIVE: single writes (a memory, a PATCH, a message, its ingestion).
- BULK: batch creates, imports, re-embedding.
- BACKGROUND: work the service does for itself (sentence vectors, backfills): a call is formed
  from it only when no text of any other class waits, so it never delays anyone's work by
  more than one short call.

A request may carry a deadline: if its texts have not all been embedded by then it fails with
DeadlineExceededError and its remaining texts leave the queue (nobody waits for them any more).
Bulk work whose texts alone need more model time than its whole deadline is refused at once
with TooMuchWorkError, which says how many would fit. The refusals here say what happened and
what fits; the API adds what an HTTP client does about it (app/api/deadlines.py).
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from enum import IntEnum

from app.errors import DeadlineExceededError, TooMuchWorkError


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
            "model is busy with other work); nothing was written",
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
            f"{fitting} {unit} per request",
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


@dataclass
class Trace:
    """How a request was served: model calls that finished between its arrival and the call
    that took its first text (at most 1, the call already running, for the most urgent
    class), and the seconds it waited for that call."""

    waited_calls: int = 0
    queued_s: float = 0.0
