"""Neighbour expansion: the turns just before and after a high-ranked memory share part of
its score, since the evidence for an answer often spans two or three consecutive turns.

A memory's neighbours are the turn it follows (`follows_chain_id`) and the turns that follow
it, in the same session (app/memories/context.py). The store loads them, visible to the caller
only; this module decides their scores:

    score(neighbour) = max(own score, decay * score(hit))  for each of the first `top_n` hits

Neighbours not among the candidates enter the list with the shared score alone.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable

from app.db.models import Memory
from app.retrieval.candidates import Candidate, rank_by_score


def links(head: Iterable[Candidate]) -> tuple[list[uuid.UUID], list[uuid.UUID]]:
    """(chain ids of the hits, chain ids of the turns they follow): what the store looks up."""
    head = list(head)
    chains = [c.chain_id for c in head if c.chain_id is not None]
    follows = [c.follows_chain_id for c in head if c.follows_chain_id is not None]
    return chains, follows


def spread_to_neighbours(
    ranked: list[Candidate], neighbours: list[Memory], decay: float, top_n: int
) -> tuple[list[Candidate], int]:
    """Re-score with the hits' shares; returns the re-ranked list and how many memories
    joined it as neighbours only."""
    by_chain = {c.chain_id: c for c in ranked if c.chain_id is not None}
    joined = 0
    for memory in neighbours:
        if memory.chain_id not in by_chain:
            by_chain[memory.chain_id] = Candidate(memory_id=memory.id, score=0.0).load(memory)
            joined += 1
    adjacent: dict[uuid.UUID, list[Candidate]] = {}
    for candidate in by_chain.values():
        if candidate.follows_chain_id in by_chain:
            before = by_chain[candidate.follows_chain_id]
            adjacent.setdefault(before.memory_id, []).append(candidate)
            adjacent.setdefault(candidate.memory_id, []).append(before)
    shares: dict[uuid.UUID, float] = {}
    for hit in ranked[:top_n]:
        for neighbour in adjacent.get(hit.memory_id, []):
            share = decay * hit.score
            shares[neighbour.memory_id] = max(shares.get(neighbour.memory_id, 0.0), share)
    everyone = list(by_chain.values())
    for candidate in everyone:
        candidate.score = max(candidate.score, shares.get(candidate.memory_id, 0.0))
    return rank_by_score(everyone, "neighbours"), joined
