"""What a text costs the model, how fast the model is, and how much one call may hold.

A text's cost stands for its model time: its tokens where the batcher is given the model's
tokenizer (the embedding server is), else its characters, capped where models truncate.

The speed planned with is the model's own: the quick end (lower quartile) of its recent calls,
not their mean. A call only ever runs slower than the model can (other processes on the cores,
a cold cache), so the mean of contended calls made a batch look several times bigger than it
is, and the batcher refused work an idle model would have done in time.

A call is bounded in time, not only in texts, while interactive work is about: from the speed,
`max_call_s` becomes a budget of cost per call, and bulk texts stop joining a call once it is
worth that (queries and interactive writes are never split: that would only delay them). The
model cannot be interrupted, so the longest call is the longest an interactive text can wait.
The bound holds for `BUDGET_WINDOW_S` after the last interactive or query text arrived; bulk
work alone runs in full calls, which small calls would slow (a call's fixed cost is spread over
fewer texts). The measurements behind both choices: docs/benchmarks/ingestion.md ("Mixed
traffic").
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence

import numpy as np

from app.ml.scheduling.work import Work, WorkClass

# The smallest call (in characters, as text_cost counts them) the model's speed is learnt
# from: below it, the call's fixed cost dominates. A token is about four characters.
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


def text_cost(text: str) -> int:
    return max(1, min(len(text), MAX_TEXT_COST))


def character_costs(texts: Sequence[str]) -> list[int]:
    """Each text's cost in characters, capped where models truncate."""
    return [text_cost(t) for t in texts]


class SpeedModel:
    """The model's seconds per unit of cost, learnt from the calls made, and the clocks of
    the work that arrived: the call budget's window and how long the model has been idle."""

    def __init__(
        self,
        costs: Callable[[Sequence[str]], list[int]] = character_costs,
        min_learn_cost: int = MIN_LEARN_CHARS,
        max_call_s: float = 0.0,
    ) -> None:
        # A text's share of model time: characters, or the model's tokens (embed-serve).
        self.costs = costs
        self._min_learn_cost = min_learn_cost
        self._speeds: deque[float] = deque(maxlen=SPEED_WINDOW)
        # 0: calls bounded by max_batch only. Else the model's seconds per unit of cost, learnt
        # from the calls made, turns it into a budget of cost per call.
        self._max_call_s = max_call_s
        self.seconds_per_unit: float | None = None
        # time.monotonic() when interactive (or query) work last arrived: the budget's window.
        self.interactive_seen_at: float | None = None
        self.foreground_seen_at: float | None = None  # the last text of any caller's work

    def arrived(self, work: Work) -> None:
        """Work has come for the model: the clocks of `idle_s` and of the budget's window."""
        if work.work_class < WorkClass.BULK:
            self.interactive_seen_at = time.monotonic()
        if not work.background:
            self.foreground_seen_at = time.monotonic()

    def idle_s(self) -> float:
        """Seconds since any caller but background work last gave the model texts (infinite:
        never, in this process)."""
        seen = self.foreground_seen_at
        return float("inf") if seen is None else time.monotonic() - seen

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

    def learn(self, cost: int, seconds: float) -> None:
        """Fold one call's seconds per unit into the model's speed: the lower quartile of the
        last SPEED_WINDOW calls, which follows a real change of speed within a few calls but
        not the slowness of a contended one. Calls below `min_learn_cost` teach nothing: a
        call's fixed cost, spread over few characters, can make one short query look many
        times slower a character than the model is, and every batch then look that big."""
        if cost < self._min_learn_cost:
            return
        self._speeds.append(seconds / cost)
        self.seconds_per_unit = float(
            np.percentile(np.fromiter(self._speeds, float), SPEED_QUANTILE, method="lower")
        )
