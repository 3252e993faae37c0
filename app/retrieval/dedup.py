"""Stage 6: content de-duplication — drop a result >= threshold cosine-similar to a
higher-ranked one. The similar pairs come from the store; this is the ordering logic."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Iterable

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


async def dedup_head(
    ranked: list[Candidate],
    top_k: int,
    head_size: int,
    similar_pairs: Callable[[list[uuid.UUID]], Awaitable[list[tuple[uuid.UUID, uuid.UUID]]]],
) -> tuple[list[Candidate], list[Candidate]]:
    """De-duplicate the first `head_size` candidates (pairs cost grows with its square),
    doubling the window only while fewer than `top_k` survive. Returns (ranked, dropped)."""
    while True:
        head = ranked[:head_size]
        kept, dropped = drop_near_duplicates(head, await similar_pairs([c.memory_id for c in head]))
        if len(kept) >= top_k or head_size >= len(ranked):
            return kept + ranked[head_size:], dropped
        head_size *= 2
