"""Time mentions (lever `time_mentions`): a question that asks "when" is answered by a
memory that names a time ("I went there yesterday"), so such memories get
`x (1 + boost)`; and where a window is known, the temporal boost measures a memory by the
time its content names (`mentioned_at`) rather than the time it was said, when it names one.
"""

from __future__ import annotations

from app.retrieval.candidates import Candidate, rank_by_score


def boost_time_mentions(ranked: list[Candidate], boost: float) -> tuple[list[Candidate], int]:
    """Returns the re-ranked list and how many candidates name a time."""
    naming = 0
    for candidate in ranked:
        if candidate.mentioned_at is not None:
            candidate.score *= 1.0 + boost
            naming += 1
    return rank_by_score(ranked, "time_mention"), naming


def use_mentioned_times(ranked: list[Candidate]) -> None:
    """Point each candidate's time at what its content names, where it names something."""
    for candidate in ranked:
        if candidate.mentioned_at is not None:
            candidate.when = candidate.mentioned_at
