"""Stage 4: weighted Reciprocal Rank Fusion, and the levers that change its weights or its
formula.

RRF_r(d) = 1 / (k + rank_r(d)) with 1-based ranks; score(d) = sum_r weight_r * RRF_r(d).
A document missing from a list contributes nothing for that list.
"""

from __future__ import annotations

import uuid
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass

from app.retrieval.candidates import Candidate, rank_by_score
from app.retrieval.entities import names_something
from app.retrieval.plan import Basis, Lever, RetrievalPlan, Tuning
from app.search_index.client import TextHit

BALANCED_LEGS = Lever(
    "balanced_legs",
    "Fusion weighs the two legs equally (0.5 / 0.5) instead of the settings' 70/30: with "
    "context on both legs, BM25 is nearly as strong alone as the vector leg.",
)
TYPED_WEIGHTS = Lever(
    "typed_weights",
    "Fusion weights by query type: a query naming an entity or a number (after the speakers' "
    "names are gone) weighs BM25 0.7 and the vector 0.3.",
)
SCORE_FUSION = Lever("score_fusion", "Fusion by min-max normalised scores instead of RRF ranks.")
LEVERS = (BALANCED_LEGS, TYPED_WEIGHTS, SCORE_FUSION)

BALANCED = (0.5, 0.5)  # lever balanced_legs: (vector, BM25)
LEXICAL = (0.3, 0.7)  # lever typed_weights, for a query that names something: the paper's
# 70/30 turned round, since exact names and numbers are what BM25 matches and a sentence
# vector blurs


def leg_weights(
    configured: tuple[float, float], balanced: bool, lexical: bool
) -> tuple[tuple[float, float], str]:
    """The legs' fusion weights (vector, BM25) and why: a lexical query (lever typed_weights
    found a name or number in it) first, then balanced_legs, then the settings' weights."""
    if lexical:
        return LEXICAL, "lexical query"
    if balanced:
        return BALANCED, "balanced"
    return configured, "configured"


@dataclass(frozen=True, slots=True)
class Weights:
    """The legs' fusion weights (vector, BM25) as the plan resolved them: the request's own
    over every lever's."""

    legs: tuple[float, float]
    why: str  # "balanced" or "configured"
    # Lever typed_weights: the weights of a query that names something (None: lever off).
    lexical: tuple[float, float] | None


def resolve_weights(basis: Basis) -> Weights:
    asked = basis.asked

    def over(weights: tuple[float, float]) -> tuple[float, float]:
        weight_vector, weight_bm25 = weights
        return (
            asked.weight_vector if asked.weight_vector is not None else weight_vector,
            asked.weight_bm25 if asked.weight_bm25 is not None else weight_bm25,
        )

    configured = (basis.settings.rrf_weight_vector, basis.settings.rrf_weight_bm25)
    weights, why = leg_weights(configured, basis.on(BALANCED_LEGS), lexical=False)
    lexical, _ = leg_weights(configured, balanced=False, lexical=True)
    return Weights(over(weights), why, over(lexical) if basis.on(TYPED_WEIGHTS) else None)


WEIGHTS = Tuning("fusion", resolve_weights)
TUNINGS = (WEIGHTS,)


def plan_weights(
    plan: RetrievalPlan, text: str, speakers: Iterable[str]
) -> tuple[tuple[float, float], str | None]:
    """The weights (vector, BM25) this search fuses with, and why when lever typed_weights
    asked (the explanation's `fusion` status). `text` is what the legs searched."""
    weights = plan.numbers(WEIGHTS)
    if weights.lexical is None:
        return weights.legs, None
    if names_something(text, speakers):
        return weights.lexical, "lexical query"
    return weights.legs, weights.why


def fuse(
    plan: RetrievalPlan,
    vector_hits: list[Candidate],
    text_hits: Sequence[TextHit],
    weights: tuple[float, float],
) -> list[Candidate]:
    """Stage 4 as the plan asks: weighted RRF, or normalised scores (lever score_fusion)."""
    weight_vector, weight_bm25 = weights
    if plan.on(SCORE_FUSION):
        return fuse_scores(vector_hits, text_hits, weight_vector, weight_bm25)
    return fuse_legs(vector_hits, text_hits, plan.rrf_k, weight_vector, weight_bm25)


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


def record_bm25_rank(candidate: Candidate, rank: int) -> None:
    """The rank only: a BM25 score carries index-wide term statistics (IDF over every user's
    documents), so showing it would tell a user whether others store a word."""
    candidate.record("bm25", rank, None)


def fuse_legs(
    vector_hits: list[Candidate],
    text_hits: Sequence[TextHit],
    k: int,
    weight_vector: float,
    weight_bm25: float,
) -> list[Candidate]:
    """Stage 4 over the two legs' candidates: one candidate per memory, scored and ranked by
    weighted RRF, with each leg's rank kept for the explanation."""
    by_id = {c.memory_id: c for c in vector_hits}
    for rank, hit in enumerate(text_hits, start=1):
        candidate = by_id.setdefault(hit.memory_id, Candidate(memory_id=hit.memory_id))
        record_bm25_rank(candidate, rank)
    fused = fuse_rrf(
        [
            RankedList("vector", [c.memory_id for c in vector_hits], weight_vector),
            RankedList("bm25", [h.memory_id for h in text_hits], weight_bm25),
        ],
        k,
    )
    return scored_in_order(fused, by_id, "rrf")


def scored_in_order(
    fused: Sequence[FusedScore], by_id: dict[uuid.UUID, Candidate], stage: str
) -> list[Candidate]:
    """The candidates in fused order, each with its fused score, recorded at `stage`."""
    ranked: list[Candidate] = []
    for position, item in enumerate(fused, start=1):
        candidate = by_id[uuid.UUID(str(item.id))]
        candidate.score = item.score
        candidate.record(stage, position, item.score)
        ranked.append(candidate)
    return ranked


def min_max(values: Sequence[float]) -> list[float]:
    """Scale to [0, 1] within one list (all 1.0 when every value is the same)."""
    if not values:
        return []
    low, high = min(values), max(values)
    if high - low <= 1e-12:
        return [1.0 for _ in values]
    return [(v - low) / (high - low) for v in values]


def fuse_scores(
    vector_hits: list[Candidate],
    text_hits: Sequence[TextHit],
    weight_vector: float,
    weight_bm25: float,
) -> list[Candidate]:
    """Score-based fusion (lever score_fusion), beside RRF: each leg's scores min-max
    normalised within the leg, then summed with the legs' weights. Unlike RRF it keeps how
    far apart two hits are, not just their order; a missing leg contributes 0."""
    by_id = {c.memory_id: c for c in vector_hits}
    fused = dict.fromkeys(by_id, 0.0)
    for candidate, value in zip(vector_hits, min_max([c.score for c in vector_hits]), strict=True):
        fused[candidate.memory_id] += weight_vector * value
    for rank, (hit, value) in enumerate(
        zip(text_hits, min_max([h.score for h in text_hits]), strict=True), start=1
    ):
        candidate = by_id.setdefault(hit.memory_id, Candidate(memory_id=hit.memory_id))
        record_bm25_rank(candidate, rank)
        fused[hit.memory_id] = fused.get(hit.memory_id, 0.0) + weight_bm25 * value
    for memory_id, score in fused.items():
        by_id[memory_id].score = score
    return rank_by_score(list(by_id.values()), "rrf")
