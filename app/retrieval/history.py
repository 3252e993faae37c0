"""Stage 8: history — for "used to / before / what did I say" queries, return the earlier
versions of each hit's chain too, each marked superseded with its validity interval."""

from __future__ import annotations

from app.db.models import Memory
from app.retrieval.candidates import Candidate


def with_history(results: list[Candidate], earlier: dict, max_versions: int) -> list[Candidate]:
    """Interleave: each current hit, then its earlier versions (newest first, at most
    `max_versions`). Earlier versions carry `history_of` = the hit's id and no score."""
    combined: list[Candidate] = []
    for hit in results:
        combined.append(hit)
        versions: list[Memory] = earlier.get(hit.chain_id, [])[:max_versions]
        for version in versions:
            combined.append(
                Candidate(memory_id=version.id, score=hit.score, history_of=hit.memory_id).load(
                    version
                )
            )
    return combined
