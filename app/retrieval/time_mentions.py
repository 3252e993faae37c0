"""Time mentions (lever `time_mentions`): a question that asks "when" is answered by a
memory that names a time ("I went there yesterday"), so such memories get
`x (1 + boost)`; and where a window is known, the temporal boost measures a memory by the
time its content names (`mentioned_at`) rather than the time it was said, when it names one.
"""

from __future__ import annotations

from app.retrieval.candidates import Candidate, boost_scores


def boost_time_mentions(ranked: list[Candidate], boost: float) -> tuple[list[Candidate], int]:
    """Returns the re-ranked list and how many candidates name a time."""
    naming = sum(1 for c in ranked if c.mentioned_at is not None)
    return boost_scores(
        ranked, lambda c: 1.0 + boost if c.mentioned_at is not None else 1.0, "time_mention"
    ), naming


def use_mentioned_times(ranked: list[Candidate]) -> None:
    """Point each candidate's time at what its content names, where it names something."""
    for candidate in ranked:
        if candidate.mentioned_at is not None:
            candidate.when = candidate.mentioned_at
