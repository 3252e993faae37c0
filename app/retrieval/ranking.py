"""After fusion: the steps that load, re-score and cut the candidates, in the order they run.

Load and visibility · [speaker · entities · neighbours · time mentions · specificity] · 5
temporal boost · [sessions] · 6 de-duplication · 7 cross-encoder · relevance and its floor ·
[relevance order · relevance guard] · [part slots] · [newer first] · final cut · 8 history.
The bracketed steps are levers (part slots: query_parts and event_order,
app/retrieval/parts.py); each step reads its own numbers from the plan (`plan.numbers(tuning)`,
the tuning declared beside the step).
"""

from __future__ import annotations

from dataclasses import dataclass

from app.db.tenant import current_tenant
from app.retrieval import entities as entity_steps
from app.retrieval import parts, relevance_steps, sessions
from app.retrieval.candidates import Candidate
from app.retrieval.dedup import dedup_head
from app.retrieval.disagreement import NEWER_FIRST, mark_earlier
from app.retrieval.entities import boost_shared_entities
from app.retrieval.history import with_history
from app.retrieval.neighbours import links, spread_to_neighbours
from app.retrieval.plan import Lever, Tuning
from app.retrieval.relevance import score_relevance
from app.retrieval.relevance_steps import exact_cosines, question_vector
from app.retrieval.rerank import rerank
from app.retrieval.speakers import boost_named_speakers
from app.retrieval.specificity import boost_specific
from app.retrieval.steps import SearchContext, Step, explained_by, levers_of
from app.retrieval.temporal import apply_temporal_boost
from app.retrieval.time_mentions import boost_time_mentions, use_mentioned_times
from app.retrieval.visibility import load_visible

Ranked = list[Candidate]

SPEAKER = Lever(
    "speaker",
    "When the query names a speaker of the candidates, that speaker's memories are boosted "
    "by COGNIS_SPEAKER_BOOST.",
)
ENTITIES = Lever(
    "entities",
    "Memories that mention the entities the query names rank higher (COGNIS_ENTITY_BOOST).",
)
NEIGHBOURS = Lever(
    "neighbours", "Adjacent turns of a high-ranked memory share a decayed part of its score."
)
TIME_MENTIONS = Lever(
    "time_mentions",
    '"When" questions prefer memories that name a time; the temporal boost uses the named '
    "time where there is one.",
)
SPECIFICITY = Lever(
    "specificity",
    "Memories whose rarest words are rare among the user's own memories rank higher "
    "(COGNIS_SPECIFICITY_BOOST): specific facts before generic chatter.",
)


@dataclass(frozen=True, slots=True)
class Spread:
    """Lever neighbours: the head whose scores spread, and the share adjacent turns get."""

    top_n: int
    decay: float


@dataclass(frozen=True, slots=True)
class Specificity:
    words: int  # a memory's rarest words whose mean IDF is its specificity
    sample: int  # the user's memories counted
    prior: float  # memories of evidence the boost is shrunk by
    boost: float


@dataclass(frozen=True, slots=True)
class TemporalWeights:
    fused: float
    time: float
    floor: float


SPEAKER_BOOST = Tuning("speaker", lambda basis: basis.settings.speaker_boost)
ENTITY_BOOST = Tuning("entities", lambda basis: basis.settings.entity_boost)
SPREAD = Tuning(
    "neighbours",
    lambda basis: Spread(basis.settings.neighbour_top_n, basis.settings.neighbour_decay),
)
TIME_MENTION_BOOST = Tuning("time_mentions", lambda basis: basis.settings.time_mention_boost)
RARITY = Tuning(
    "specificity",
    lambda basis: Specificity(
        basis.settings.specificity_words,
        basis.settings.specificity_sample,
        basis.settings.specificity_prior,
        basis.settings.specificity_boost,
    ),
)
TEMPORAL = Tuning(
    "temporal",
    lambda basis: TemporalWeights(
        basis.settings.temporal_weight_fused,
        basis.settings.temporal_weight_time,
        basis.settings.temporal_min_score,
    ),
)
DEDUP_THRESHOLD = Tuning("dedup", lambda basis: basis.settings.dedup_threshold)
RERANK_TOP_N = Tuning("rerank", lambda basis: basis.settings.rerank_top_n)
HISTORY_VERSIONS = Tuning("history", lambda basis: basis.settings.history_max_versions)


async def load(ranked: Ranked, context: SearchContext) -> tuple[Ranked, None]:
    # Rows are re-read from Postgres by id *and user* under the visibility rule: the index
    # is never the only guard.
    request = context.request
    rows = await context.repository.visible_current(
        request.user_id, [c.memory_id for c in ranked], request.session_id
    )
    return load_visible(ranked, rows), None


async def speaker(ranked: Ranked, context: SearchContext) -> tuple[Ranked, str]:
    boost = context.plan.numbers(SPEAKER_BOOST)
    ranked, named = boost_named_speakers(context.request.query, ranked, boost)
    return ranked, f"boosted {', '.join(sorted(named))}" if named else "none named"


async def entities(ranked: Ranked, context: SearchContext) -> tuple[Ranked, str]:
    boost = context.plan.numbers(ENTITY_BOOST)
    ranked, named = boost_shared_entities(context.request.query, ranked, boost)
    return ranked, f"boosted {', '.join(named)}" if named else "none named"


async def neighbours(ranked: Ranked, context: SearchContext) -> tuple[Ranked, str]:
    request, spread = context.request, context.plan.numbers(SPREAD)
    chains, follows = links(ranked[: spread.top_n])
    found = await context.repository.neighbours(
        request.user_id, chains, follows, request.session_id
    )
    ranked, joined = spread_to_neighbours(ranked, found, spread.decay, spread.top_n)
    return ranked, f"{joined} joined"


async def time_mentions(ranked: Ranked, context: SearchContext) -> tuple[Ranked, str]:
    use_mentioned_times(ranked)
    if not context.analysis.asks_when:
        return ranked, "not a when-question"
    ranked, naming = boost_time_mentions(ranked, context.plan.numbers(TIME_MENTION_BOOST))
    return ranked, f"boosted {naming} naming a time"


async def specificity(ranked: Ranked, context: SearchContext) -> tuple[Ranked, str]:
    numbers, request = context.plan.numbers(RARITY), context.request
    rarity = await context.word_rarity.get(
        (current_tenant(), request.user_id),
        numbers.words,
        lambda: context.repository.content_sample(request.user_id, numbers.sample),
    )
    if rarity.spread <= 0:
        return ranked, f"too few memories ({rarity.documents})"
    prior = numbers.prior
    return boost_specific(ranked, rarity, numbers.boost, prior), (
        f"{rarity.documents} memories' words, weight {rarity.weight(prior):.2f}"
    )


def without_window(_: Ranked, context: SearchContext) -> str | None:
    return None if context.analysis.window is not None else "no time window in query"


async def temporal(ranked: Ranked, context: SearchContext) -> tuple[Ranked, str]:
    weights = context.plan.numbers(TEMPORAL)
    assert context.analysis.window is not None  # skipped otherwise (without_window)
    ranked = apply_temporal_boost(
        ranked, context.analysis.window, weights.fused, weights.time, weights.floor
    )
    return ranked, "applied"


async def dedup(ranked: Ranked, context: SearchContext) -> tuple[Ranked, str]:
    # Over the head of the list (what can still be shown).
    request, plan = context.request, context.plan
    ranked, dropped = await dedup_head(
        ranked,
        request.top_k,
        max(request.top_k * 2, plan.numbers(RERANK_TOP_N)),
        lambda ids: context.repository.near_duplicate_pairs(
            request.user_id, ids, plan.numbers(DEDUP_THRESHOLD)
        ),
    )
    return ranked, f"dropped {len(dropped)}"


def without_cross_encoder(_: Ranked, context: SearchContext) -> str | None:
    return None if context.cross_encoder is not None else "skipped: no cross-encoder configured"


async def cross_encode(ranked: Ranked, context: SearchContext) -> tuple[Ranked, str]:
    assert context.cross_encoder is not None  # skipped otherwise (without_cross_encoder)
    top_n = context.plan.numbers(RERANK_TOP_N)
    ranked = await rerank(context.request.query, ranked, context.cross_encoder, top_n)
    return ranked, "applied"


async def newer_first(ranked: Ranked, context: SearchContext) -> tuple[Ranked, str]:
    # Over the head of the list, as de-duplication: a newer fact below it is not pulled up.
    top_k = context.request.top_k
    window = max(top_k * 2, context.plan.numbers(RERANK_TOP_N))
    head, marked, moved = mark_earlier(ranked[:window], top_k)
    return head + ranked[window:], f"{marked} marked earlier, {moved} moved"


async def final(ranked: Ranked, context: SearchContext) -> tuple[Ranked, None]:
    results = ranked[: context.request.top_k]
    for position, candidate in enumerate(results, start=1):
        candidate.record("final", position, candidate.score)
    return results, None


def without_history_intent(results: Ranked, context: SearchContext) -> str | None:
    return None if context.analysis.history and results else "no history intent"


async def history(results: Ranked, context: SearchContext) -> tuple[Ranked, str]:
    request = context.request
    earlier = await context.repository.superseded_versions(
        request.user_id, list({c.chain_id for c in results if c.chain_id}), request.session_id
    )
    results = with_history(results, earlier, context.plan.numbers(HISTORY_VERSIONS))
    if context.query_vector is not None:
        question = await question_vector(context)  # as the current results' (cached)
        await score_relevance(results, exact_cosines(context, question))  # earlier versions'
    return results, "applied"


RANKING_STEPS: tuple[Step[Ranked], ...] = (
    Step("load", load, timer="load_ms"),
    Step("speaker", speaker, timer="speaker_ms", lever=SPEAKER, explains="speaker"),
    Step("entities", entities, timer="entities_ms", lever=ENTITIES, explains="entities"),
    Step("neighbours", neighbours, timer="neighbours_ms", lever=NEIGHBOURS, explains="neighbours"),
    entity_steps.STEP,
    Step(
        "time_mentions",
        time_mentions,
        timer="time_mentions_ms",
        lever=TIME_MENTIONS,
        explains="time_mention",
    ),
    Step(
        "specificity",
        specificity,
        timer="specificity_ms",
        lever=SPECIFICITY,
        explains="specificity",
    ),
    Step(
        "temporal",
        temporal,
        timer="temporal_boost_ms",
        switch="temporal",
        skip=without_window,
        explains="temporal",
    ),
    sessions.STEP,
    Step("dedup", dedup, timer="dedup_ms", switch="dedup"),
    Step(
        "rerank",
        cross_encode,
        timer="cross_encoder_ms",
        switch="rerank",
        skip=without_cross_encoder,
        explains="rerank",
    ),
    *relevance_steps.STEPS,
    parts.STEP,
    Step("newer_first", newer_first, timer="newer_first_ms", lever=NEWER_FIRST),
    Step("final", final, explains="final"),
    Step(
        "history",
        history,
        timer="version_chain_ms",
        switch="history",
        skip=without_history_intent,
    ),
)
LEVERS = levers_of(RANKING_STEPS)
TUNINGS = (
    SPEAKER_BOOST,
    ENTITY_BOOST,
    SPREAD,
    entity_steps.HOP,
    TIME_MENTION_BOOST,
    RARITY,
    TEMPORAL,
    sessions.LIFT,
    DEDUP_THRESHOLD,
    RERANK_TOP_N,
    *relevance_steps.TUNINGS,
    parts.SLOTS,
    HISTORY_VERSIONS,
)
STAGES = explained_by(RANKING_STEPS)
