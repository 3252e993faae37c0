"""Stage 4: weighted Reciprocal Rank Fusion.

RRF_r(d) = 1 / (k + rank_r(d)) with 1-based ranks; score(d) = sum_r weight_r * RRF_r(d).
A document missing from a list contributes nothing for that list.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RankedList:
    name: str
    ids: Sequence[Hashable]  # best first
    weight: float


@dataclass(frozen=True, slots=True)
class FusedScore:
    id: Hashable
    score: float
    ranks: dict[str, int]  # 1-based rank in each list that contains the id


def fuse_rrf(lists: Sequence[RankedList], k: int) -> list[FusedScore]:
    """Fuse ranked lists; ties keep the order of first appearance (earlier lists first)."""
    if k < 0:
        raise ValueError("k must be >= 0")
    scores: dict[Hashable, float] = {}
    ranks: dict[Hashable, dict[str, int]] = {}
    for ranked in lists:
        for position, doc_id in enumerate(ranked.ids, start=1):
            if doc_id in ranks and ranked.name in ranks[doc_id]:
                continue  # a duplicate within one list counts once, at its best rank
            scores[doc_id] = scores.get(doc_id, 0.0) + ranked.weight / (k + position)
            ranks.setdefault(doc_id, {})[ranked.name] = position
    order = sorted(scores, key=lambda d: -scores[d])  # stable: ties keep insertion order
    return [FusedScore(id=d, score=scores[d], ranks=ranks[d]) for d in order]
