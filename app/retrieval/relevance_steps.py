"""The steps that judge relevance: each candidate's relevance on a fixed scale (and the floor),
and the first results settled by it (levers `relevance_order`, `relevance_guard`, and
`language_legs`' order). Listed in RANKING_STEPS (app/retrieval/ranking.py)."""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from app.db.tenant import current_tenant
from app.errors import EmbedderUnavailableError
from app.retrieval.candidates import Candidate
from app.retrieval.legs import VECTOR_LEG
from app.retrieval.multilingual_leg import dated_in_window, multilingual_judges
from app.retrieval.plan import Lever, Tuning
from app.retrieval.relevance import (
    ExactCosines,
    above_floor,
    on_scale,
    score_relevance,
    settle_head,
)
from app.retrieval.steps import SearchContext, Step
from app.vocabulary import NON_LATIN_LANGUAGES

Ranked = list[Candidate]

RELEVANCE_ORDER = Lever(
    "relevance_order",
    "The first results are settled by relevance: none stands above a result of the top k "
    "more relevant by more than COGNIS_RELEVANCE_ORDER_MARGIN (the fused order breaks the "
    "closer calls).",
)
RELEVANCE_GUARD = Lever(
    "relevance_guard",
    "The fused order stands in the first results only where the evidence backs it: none "
    "stands above a result of the top k more relevant by more than "
    "COGNIS_RELEVANCE_ORDER_MARGIN unless both legs (BM25 and the vector leg) rank it above "
    "that one too.",
)
LANGUAGE_LEGS = Lever(
    "language_legs",
    "For a query the English model cannot read (letters outside the Latin script), the "
    "multilingual model judges: the first results are settled by the multilingual relevance "
    "(as lever relevance_order does, at COGNIS_MULTILINGUAL_ORDER_MARGIN), and those dated "
    "in the question's time window stay past its floor. Needs multilingual_vector.",
)


@dataclass(frozen=True, slots=True)
class Floors:
    """Relevance's floors: the request's `min_relevance` for both, else the settings'."""

    english: float
    multilingual: float


@dataclass(frozen=True, slots=True)
class Settling:
    """How the first results are settled by relevance."""

    head: int  # the first results whose places relevance settles
    margin: float  # levers relevance_order and relevance_guard
    language_margin: float  # lever language_legs, by the multilingual relevance


FLOORS = Tuning(
    "relevance",
    lambda basis: (
        Floors(basis.settings.min_relevance, basis.settings.multilingual_min_relevance)
        if basis.asked.min_relevance is None
        else Floors(basis.asked.min_relevance, basis.asked.min_relevance)
    ),
)
SETTLING = Tuning(
    "relevance_order",
    lambda basis: Settling(
        basis.settings.relevance_order_head,
        basis.settings.relevance_order_margin,
        basis.settings.multilingual_order_margin,
    ),
)


def exact_cosines(context: SearchContext, query_vector: np.ndarray | None = None) -> ExactCosines:
    """Postgres's exact 768D cosines (content or context, whichever is closer) to
    `query_vector`, by default the legs' own."""
    vector = query_vector if query_vector is not None else context.query_vector
    user_id = context.request.user_id
    assert vector is not None  # set by the pipeline once the legs have run

    async def exact(memory_ids: list[uuid.UUID]) -> dict[uuid.UUID, float]:
        return await context.repository.exact_768d_scores_with_context(user_id, memory_ids, vector)

    return exact


async def question_vector(context: SearchContext) -> np.ndarray | None:
    """The vector of the question as asked, where the legs searched another text (lever
    `speaker_query` took the speakers' names out): "What did Ann research?" is about Ann's
    research, and a turn of Bob's about research answers it less, which the name-free text
    cannot tell. In the first person where lever `first_person` is on. None where the legs
    embedded that same text, or the model cannot answer now (relevance then keeps the legs'
    vector)."""
    if context.question_text is None:
        return None
    try:
        embedding = await context.embedder.embed_query(
            context.question_text, current_tenant(), context.request.user_id
        )
    except EmbedderUnavailableError:
        return None
    return embedding.full


def _known_cosine(context: SearchContext) -> Callable[[Candidate], float | None]:
    """The vector leg's exact 768D cosine, where it is relevance's own (content or context,
    whichever is closer: the context lever on, and no other query vector). With the sentence
    lever it is not (a sentence's may be the best): the vector leg sets relevance itself."""
    if not context.plan.numbers(VECTOR_LEG).scores_relevance:
        return lambda _: None
    return lambda c: exact.score if (exact := c.stages.get("768d")) is not None else None


async def _multilingual_relevance(ranked: Ranked, context: SearchContext) -> set[uuid.UUID]:
    """Where the multilingual leg ran, the results the English model cannot judge (all of
    them for a query not in the Latin script, else those in another script) take their
    multilingual cosine as relevance; the ids of those that did (a memory without the vector
    keeps the English one)."""
    vector = context.multilingual_query_vector
    if vector is None:
        return set()
    judged = [
        c.memory_id
        for c in ranked
        if not context.english_query
        or (c.memory is not None and c.memory.language in NON_LATIN_LANGUAGES)
    ]
    cosines = await context.repository.exact_ml_scores(context.request.user_id, judged, vector)
    for candidate in ranked:
        if (cosine := cosines.get(candidate.memory_id)) is not None:
            candidate.relevance = on_scale(cosine)
    return set(cosines)


def without_query_vector(_: Ranked, context: SearchContext) -> str | None:
    if context.query_vector is not None:
        return None
    return "skipped: the vector stage is off (no query vector)"


async def relevance(ranked: Ranked, context: SearchContext) -> tuple[Ranked, str]:
    """Each candidate's relevance on a fixed scale; those below the floor leave, before the
    cut (so one further down that reaches it can take a dropped one's place)."""
    question = await question_vector(context)
    if question is None:
        await score_relevance(ranked, exact_cosines(context), _known_cosine(context))
    else:
        for candidate in ranked:
            candidate.relevance = None  # the legs' vector's: the question's replaces it
        await score_relevance(ranked, exact_cosines(context, question))
    multilingual = await _multilingual_relevance(ranked, context)
    floors = context.plan.numbers(FLOORS)
    floor = floors.english
    kept = above_floor(ranked, floor, multilingual, floors.multilingual)
    if context.plan.on(LANGUAGE_LEGS):  # what the time window dates is relevant by its date
        dated = dated_in_window(ranked, context.analysis.window, multilingual)
        dated |= {c.memory_id for c in kept}
        kept = [c for c in ranked if c.memory_id in dated]
    for position, candidate in enumerate(kept, start=1):
        candidate.record("relevance", position, candidate.relevance)
    if not floor:
        return kept, "scored (no floor)"
    return kept, f"floor {floor:g}: dropped {len(ranked) - len(kept)}"


def _settled(
    ranked: Ranked,
    context: SearchContext,
    stage: str,
    margin: float,
    backed: Callable[[Candidate, Candidate], bool] = lambda _above, _below: False,
) -> tuple[Ranked, str]:
    """The head settled by relevance (app/retrieval/relevance.py, settle_head), the order
    left recorded at `stage` for the results that can be shown."""
    ranked, moved = settle_head(
        ranked,
        context.plan.numbers(SETTLING).head,
        context.request.top_k,
        margin,
        backed,
    )
    shown = ranked[: context.request.top_k]
    # Each takes the score of the place it took, so scores still fall with the order.
    for candidate, score in zip(shown, sorted((c.score for c in shown), reverse=True), strict=True):
        candidate.score = score
    for position, candidate in enumerate(shown, start=1):
        candidate.record(stage, position, candidate.relevance)
    return ranked, f"moved {moved}"


async def relevance_order(ranked: Ranked, context: SearchContext) -> tuple[Ranked, str]:
    margin = context.plan.numbers(SETTLING).margin
    return _settled(ranked, context, "relevance_order", margin)


def legs_agree_above(above: Candidate, below: Candidate) -> bool:
    """Whether both legs ranked `above` over `below`: BM25 (the question's own words) and the
    vector leg (its meaning as the legs searched it, sentences and context included). A
    candidate a leg did not find ranks last in it. Where the cosine of the question as asked
    disagrees with both, the fused order stands; where one leg sides with the cosine, the
    cosine settles it."""
    lexical = _rank_in(above, BM25_STAGES) < _rank_in(below, BM25_STAGES)
    semantic = _rank_in(above, VECTOR_STAGES) < _rank_in(below, VECTOR_STAGES)
    return lexical and semantic


# Each leg's stages, its final ranking first: the vector leg's last pass is the feedback
# lever's where it ran, else the exact 768D one, else the 256D shortlist (stage switches).
BM25_STAGES = ("bm25",)
VECTOR_STAGES = ("feedback", "768d", "256d")


def _rank_in(candidate: Candidate, stages: tuple[str, ...]) -> float:
    for stage in stages:
        found = candidate.stages.get(stage)
        if found is not None and found.rank is not None:
            return found.rank
    return math.inf


async def relevance_guard(ranked: Ranked, context: SearchContext) -> tuple[Ranked, str]:
    margin = context.plan.numbers(SETTLING).margin
    return _settled(ranked, context, "relevance_guard", margin, legs_agree_above)


async def language_order(ranked: Ranked, context: SearchContext) -> tuple[Ranked, str]:
    margin = context.plan.numbers(SETTLING).language_margin
    return _settled(ranked, context, "language_order", margin)


def english_reads_query(_: Ranked, context: SearchContext) -> str | None:
    """Lever language_legs' order applies where the multilingual model judges every result,
    lever relevance_order does not settle the head already, and no time window ordered it
    (the temporal boost orders a question like 昨日は何をした by time, not by its words)."""
    if context.plan.on(RELEVANCE_ORDER):
        return "relevance_order settles the head"
    if context.analysis.window is not None:
        return "a time window orders the results"
    if context.query_vector is None:
        return "skipped: the vector stage is off (no query vector)"
    if not multilingual_judges(context.english_query, context.multilingual_query_vector):
        return "the English model reads the query"
    return None


# The steps, in the order they run (RANKING_STEPS, app/retrieval/ranking.py).
RELEVANCE = Step(
    "relevance", relevance, timer="relevance_ms", skip=without_query_vector, explains="relevance"
)
RELEVANCE_ORDER_STEP = Step(
    "relevance_order",
    relevance_order,
    timer="relevance_order_ms",
    lever=RELEVANCE_ORDER,
    skip=without_query_vector,
    explains="relevance_order",
)
RELEVANCE_GUARD_STEP = Step(
    "relevance_guard",
    relevance_guard,
    timer="relevance_guard_ms",
    lever=RELEVANCE_GUARD,
    skip=without_query_vector,
    explains="relevance_guard",
)
# The same settling, by the multilingual relevance, for a query in another script: after
# the guard, since BM25's word matches are what misorder such a query's head.
LANGUAGE_ORDER_STEP = Step(
    "language_order",
    language_order,
    timer="relevance_order_ms",
    lever=LANGUAGE_LEGS,
    skip=english_reads_query,
    explains="language_order",
)
STEPS = (RELEVANCE, RELEVANCE_ORDER_STEP, RELEVANCE_GUARD_STEP, LANGUAGE_ORDER_STEP)
TUNINGS = (FLOORS, SETTLING)
