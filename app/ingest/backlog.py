"""Backpressure for messages: a message the workers could not apply within the bound is
refused at once (429 + Retry-After), instead of being accepted into minutes of lag.

A message is searchable once a worker has applied it, so what a new one waits is the
backlog of its queue ahead of it. That wait is estimated from two figures of the queue's
tasks, as the request's tenant sees them: the age of the oldest task not yet applied (a
backlog that does not drain, or workers that are down or waiting out an outage, show here
first), and the open tasks divided by how fast tasks were applied over the last WINDOW_S
seconds. The larger of the two is the expected wait; past COGNIS_INGEST_MAX_WAIT_S a submit
is refused before anything is stored, and Retry-After says when the backlog should be back
within the bound. A queue that applied nothing in the window is judged by its oldest task
alone: a worker busy with its first long message is not a stall.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from app.errors import CognisError

WINDOW_S = 60.0


@dataclass(frozen=True, slots=True)
class Backlog:
    open: int  # tasks of the queue queued or running
    oldest_s: float  # how long the oldest of them has waited (0: none)
    applied: int  # tasks finished within the last WINDOW_S seconds

    def expected_wait_s(self) -> float:
        """Seconds a message sent now should wait before a worker has applied it."""
        if not self.open:
            return 0.0
        drain_s = self.open * WINDOW_S / self.applied if self.applied else 0.0
        return max(self.oldest_s, drain_s)


class IngestBacklogError(CognisError):
    """The queue's backlog would keep a message from being applied within the bound: nothing
    was stored, and the same request can be sent again after Retry-After seconds."""

    status_code = 429
    title = "Too many messages waiting"

    def __init__(self, backlog: Backlog, bound_s: float) -> None:
        wait_s = backlog.expected_wait_s()
        super().__init__(
            f"the workers are about {wait_s:.0f} s behind ({backlog.open} messages waiting, "
            f"the oldest for {backlog.oldest_s:.0f} s), more than the {bound_s:g} s a message "
            "may wait to be applied (COGNIS_INGEST_MAX_WAIT_S): nothing was stored; send it "
            "again after Retry-After seconds",
            expected_wait_s=round(wait_s, 1),
            waiting=backlog.open,
        )
        self.retry_after_s = max(1, math.ceil(wait_s - bound_s))


def check_backlog(backlog: Backlog, bound_s: float) -> None:
    """IngestBacklogError when the backlog's expected wait is past `bound_s` (> 0: with no
    bound the caller reads no backlog at all, app/ingest/intake.py)."""
    if backlog.expected_wait_s() > bound_s:
        raise IngestBacklogError(backlog, bound_s)
