"""Stage 6: content de-duplication — drop a result >= threshold cosine-similar to a
higher-ranked one. The similar pairs come from the store; this is the ordering logic."""

from __future__ import annotations

import uuid
from collections.abc import Iterable

from app.retrieval.candidates import Candidate


def drop_near_duplicates(
    ranked: list[Candidate], similar_pairs: Iterable[tuple[uuid.UUID, uuid.UUID]]
) -> tuple[list[Candidate], list[Candidate]]:
    """Walk in rank order; keep a candidate unless it is similar to one already kept.

    Returns (kept, dropped). A candidate similar only to a *dropped* one is kept: similarity
    is not transitive, and the dropped one is no longer shown.
    """
    neighbours: dict[uuid.UUID, set[uuid.UUID]] = {}
    for a, b in similar_pairs:
        neighbours.setdefault(a, set()).add(b)
        neighbours.setdefault(b, set()).add(a)
    kept: list[Candidate] = []
    dropped: list[Candidate] = []
    kept_ids: set[uuid.UUID] = set()
    for candidate in ranked:
        if neighbours.get(candidate.memory_id, set()) & kept_ids:
            dropped.append(candidate)
        else:
            kept.append(candidate)
            kept_ids.add(candidate.memory_id)
    return kept, dropped
