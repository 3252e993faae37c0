"""Speaker-aware ranking: a query that names a speaker prefers that speaker's memories.

The names come from the candidates themselves (their `speaker` field), so nothing is
configured per user: "What did Caroline research?" boosts Caroline's turns over Melanie's.
"""

from __future__ import annotations

import re

from app.retrieval.candidates import Candidate, rank_by_score


def named_speakers(query: str, speakers: set[str]) -> set[str]:
    """The speakers whose name appears in the query as a whole word (any case)."""
    return {
        name
        for name in speakers
        if name and re.search(rf"(?<!\w){re.escape(name)}(?!\w)", query, re.IGNORECASE)
    }


def boost_named_speakers(
    query: str, ranked: list[Candidate], boost: float
) -> tuple[list[Candidate], set[str]]:
    """Multiply the score of the named speakers' memories by (1 + boost); re-rank if any
    speaker is named. Returns the list and the names found."""
    speakers = {c.speaker for c in ranked if c.speaker}
    named = named_speakers(query, speakers)
    if not named:
        return ranked, named
    for candidate in ranked:
        if candidate.speaker in named:
            candidate.score *= 1.0 + boost
    return rank_by_score(ranked, "speaker"), named
