"""Relevance: a score on a fixed scale beside the fused one, and the floor it makes possible.

A result's `score` only orders one query's results: RRF and the boosts after it give ranks,
not meaning, so no threshold on it holds from one query (or user) to the next. Its `relevance`
is the cosine similarity of the query to the memory in the 768D embedding space, the better of
the memory's content and its contextual text (as the vector leg scores them), clipped to
[0, 1]. It depends on the query and that memory alone, not on the user's other memories nor on
the rank, so one threshold means the same for every query: `min_relevance` leaves out the
results below it, and a search whose candidates are all below it answers with no results
("nothing relevant") instead of top_k fillers. docs/benchmarks/locomo.md measures the floor on
questions whose answer is not in memory.

The query vector is the one the vector leg searched with (the speaker-free text where that
lever is on), so relevance costs no model call beyond the search's own; where the vector leg
already computed the same cosine (its exact 768D pass with context), it is reused, and the
others come from one query to Postgres.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Sequence, Set

from app.retrieval.candidates import Candidate

# The exact cosines of some memories to the query (Postgres computes them: the rows carry no
# vectors once loaded).
ExactCosines = Callable[[list[uuid.UUID]], Awaitable[dict[uuid.UUID, float]]]


def on_scale(cosine: float) -> float:
    """A cosine as a relevance: clipped to [0, 1] (an opposite meaning is no relevance)."""
    return round(min(1.0, max(0.0, cosine)), 4)


async def score_relevance(
    candidates: Sequence[Candidate],
    exact: ExactCosines,
    known: Callable[[Candidate], float | None] = lambda _: None,
) -> None:
    """Set the relevance of each candidate that has none yet: `known` gives the cosine a
    stage already computed the same way (the vector leg's exact 768D pass), `exact` the
    others' in one query."""
    todo = [c for c in candidates if c.relevance is None]
    cosines = {c.memory_id: cosine for c in todo if (cosine := known(c)) is not None}
    missing = [c.memory_id for c in todo if c.memory_id not in cosines]
    if missing:
        cosines.update(await exact(missing))
    for candidate in todo:
        cosine = cosines.get(candidate.memory_id)
        if cosine is not None:
            candidate.relevance = on_scale(cosine)


def above_floor(
    candidates: Sequence[Candidate],
    floor: float,
    multilingual: Set[uuid.UUID] = frozenset(),
    multilingual_floor: float = 0.0,
) -> list[Candidate]:
    """The candidates whose relevance reaches the floor, in their order (0: all of them);
    those in `multilingual` (relevance from the multilingual model) against its own floor."""

    def reaches(candidate: Candidate) -> bool:
        chosen = multilingual_floor if candidate.memory_id in multilingual else floor
        return chosen <= 0 or (candidate.relevance is not None and candidate.relevance >= chosen)

    return [c for c in candidates if reaches(c)]


def settle_head(
    candidates: Sequence[Candidate],
    head: int,
    pool: int,
    margin: float,
    backed: Callable[[Candidate, Candidate], bool] = lambda _above, _below: False,
) -> tuple[list[Candidate], int]:
    """The candidates with their first `head` places settled by relevance: each place takes
    the best-ranked of the first `pool` left that no other candidate left is more relevant
    than by more than `margin`, unless `backed(it, that one)` (other evidence for the order:
    lever `relevance_guard`). Without `backed`, no result of the head stands above one of
    the pool more relevant by more than `margin`. Only the order within the pool changes
    (what the top `pool` holds stays); candidates without a relevance are never moved past.
    Also: how many places took another candidate than the fused order's."""
    window, rest = list(candidates[:pool]), list(candidates[pool:])
    settled: list[Candidate] = []
    moved = 0

    def stands(candidate: Candidate) -> bool:
        if candidate.relevance is None:
            return True
        return all(
            other.relevance is None
            or other.relevance - candidate.relevance <= margin
            or backed(candidate, other)
            for other in window
            if other is not candidate
        )

    while window and len(settled) < head:
        if all(c.relevance is None for c in window):
            break
        pick = next(c for c in window if stands(c))  # the most relevant always stands
        moved += pick is not window[0]
        window.remove(pick)
        settled.append(pick)
    return settled + window + rest, moved
