"""After fusion: the steps that load, re-score and cut the candidates, in the order they run.

Load and visibility · [speaker · entities · neighbours · time mentions · specificity] · 5
temporal boost · [sessions] · 6 de-duplication · 7 cross-encoder · relevance and its floor ·
[relevance order · relevance guard] · [part slots] · final cut · 8 history. The bracketed
steps are levers (part slots: query_parts and event_order, app/retrieval/parts.py); each
step reads its own numbers from the plan's settings.
"""

from __future__ import annotations

from app.db.tenant import current_tenant
from app.retrieval.candidates import Candidate
from app.retrieval.dedup import dedup_head
from app.retrieval.entities import ENTITY_HOP, boost_shared_entities, entity_hop
from app.retrieval.history import with_history
from app.retrieval.multilingual_leg import LANGUAGE_LEGS as LANGUAGE_LEGS
from app.retrieval.neighbours import links, spread_to_neighbours
from app.retrieval.parts import LEVERS as PART_LEVERS
from app.retrieval.parts import part_slots, without_parts
from app.retrieval.plan import Lever
from app.retrieval.relevance import (
    score_relevance,
)
from app.retrieval.relevance_steps import (
    RELEVANCE_GUARD,
    RELEVANCE_ORDER,
    english_reads_query,
    exact_cosines,
    language_order,
    question_vector,
    relevance,
    relevance_guard,
    relevance_order,
    without_query_vector,
)
from app.retrieval.rerank import rerank
from app.retrieval.sessions import SESSIONS, not_asking_for_several, sessions
from app.retrieval.speakers import boost_named_speakers
from app.retrieval.specificity import SPECIFICITY, boost_specific
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


async def load(ranked: Ranked, context: SearchContext) -> tuple[Ranked, None]:
    # Rows are re-read from Postgres by id *and user* under the visibility rule: the index
    # is never the only guard.
    request = context.request
    rows = await context.repository.visible_current(
        request.user_id, [c.memory_id for c in ranked], request.session_id
    )
    return load_visible(ranked, rows), None


async def speaker(ranked: Ranked, context: SearchContext) -> tuple[Ranked, str]:
    boost = context.plan.settings.speaker_boost
    ranked, named = boost_named_speakers(context.request.query, ranked, boost)
    return ranked, f"boosted {', '.join(sorted(named))}" if named else "none named"


async def entities(ranked: Ranked, context: SearchContext) -> tuple[Ranked, str]:
    boost = context.plan.settings.entity_boost
    ranked, named = boost_shared_entities(context.request.query, ranked, boost)
    return ranked, f"boosted {', '.join(named)}" if named else "none named"


async def neighbours(ranked: Ranked, context: SearchContext) -> tuple[Ranked, str]:
    request, settings = context.request, context.plan.settings
    chains, follows = links(ranked[: settings.neighbour_top_n])
    found = await context.repository.neighbours(
        request.user_id, chains, follows, request.session_id
    )
    ranked, joined = spread_to_neighbours(
        ranked, found, settings.neighbour_decay, settings.neighbour_top_n
    )
    return ranked, f"{joined} joined"


async def time_mentions(ranked: Ranked, context: SearchContext) -> tuple[Ranked, str]:
    use_mentioned_times(ranked)
    if not context.analysis.asks_when:
        return ranked, "not a when-question"
    ranked, naming = boost_time_mentions(ranked, context.plan.settings.time_mention_boost)
    return ranked, f"boosted {naming} naming a time"


async def specificity(ranked: Ranked, context: SearchContext) -> tuple[Ranked, str]:
    settings, request = context.plan.settings, context.request
    rarity = await context.word_rarity.get(
        (current_tenant(), request.user_id),
        settings.specificity_words,
        lambda: context.repository.content_sample(request.user_id, settings.specificity_sample),
    )
    if rarity.spread <= 0:
        return ranked, f"too few memories ({rarity.documents})"
    prior = settings.specificity_prior
    return boost_specific(ranked, rarity, settings.specificity_boost, prior), (
        f"{rarity.documents} memories' words, weight {rarity.weight(prior):.2f}"
    )


def without_window(_: Ranked, context: SearchContext) -> str | None:
    return None if context.analysis.window is not None else "no time window in query"


async def temporal(ranked: Ranked, context: SearchContext) -> tuple[Ranked, str]:
    settings = context.plan.settings
    assert context.analysis.window is not None  # skipped otherwise (without_window)
    ranked = apply_temporal_boost(
        ranked,
        context.analysis.window,
        settings.temporal_weight_fused,
        settings.temporal_weight_time,
        settings.temporal_min_score,
    )
    return ranked, "applied"


async def dedup(ranked: Ranked, context: SearchContext) -> tuple[Ranked, str]:
    # Over the head of the list (what can still be shown).
    request, settings = context.request, context.plan.settings
    ranked, dropped = await dedup_head(
        ranked,
        request.top_k,
        max(request.top_k * 2, settings.rerank_top_n),
        lambda ids: context.repository.near_duplicate_pairs(
            request.user_id, ids, settings.dedup_threshold
        ),
    )
    return ranked, f"dropped {len(dropped)}"


def without_cross_encoder(_: Ranked, context: SearchContext) -> str | None:
    return None if context.cross_encoder is not None else "skipped: no cross-encoder configured"


async def cross_encode(ranked: Ranked, context: SearchContext) -> tuple[Ranked, str]:
    assert context.cross_encoder is not None  # skipped otherwise (without_cross_encoder)
    top_n = context.plan.settings.rerank_top_n
    ranked = await rerank(context.request.query, ranked, context.cross_encoder, top_n)
    return ranked, "applied"


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
    results = with_history(results, earlier, context.plan.settings.history_max_versions)
    if context.query_vector is not None:
        question = await question_vector(context)  # as the current results' (cached)
        await score_relevance(results, exact_cosines(context, question))  # earlier versions'
    return results, "applied"


RANKING_STEPS: tuple[Step[Ranked], ...] = (
    Step("load", load, timer="load_ms"),
    Step("speaker", speaker, timer="speaker_ms", lever=SPEAKER, explains="speaker"),
    Step("entities", entities, timer="entities_ms", lever=ENTITIES, explains="entities"),
    Step("neighbours", neighbours, timer="neighbours_ms", lever=NEIGHBOURS, explains="neighbours"),
    Step("entity_hop", entity_hop, timer="entity_hop_ms", lever=ENTITY_HOP, explains="entity_hop"),
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
    Step(
        "sessions",
        sessions,
        timer="sessions_ms",
        lever=SESSIONS,
        skip=not_asking_for_several,
        explains="sessions",
    ),
    Step("dedup", dedup, timer="dedup_ms", switch="dedup"),
    Step(
        "rerank",
        cross_encode,
        timer="cross_encoder_ms",
        switch="rerank",
        skip=without_cross_encoder,
        explains="rerank",
    ),
    Step(
        "relevance",
        relevance,
        timer="relevance_ms",
        skip=without_query_vector,
        explains="relevance",
    ),
    Step(
        "relevance_order",
        relevance_order,
        timer="relevance_order_ms",
        lever=RELEVANCE_ORDER,
        skip=without_query_vector,
        explains="relevance_order",
    ),
    Step(
        "relevance_guard",
        relevance_guard,
        timer="relevance_guard_ms",
        lever=RELEVANCE_GUARD,
        skip=without_query_vector,
        explains="relevance_guard",
    ),
    # The same settling, by the multilingual relevance, for a query in another script: after
    # the guard, since BM25's word matches are what misorder such a query's head.
    Step(
        "language_order",
        language_order,
        timer="relevance_order_ms",
        lever=LANGUAGE_LEGS,
        skip=english_reads_query,
        explains="language_order",
    ),
    Step("part_slots", part_slots, timer="part_slots_ms", serves=PART_LEVERS, skip=without_parts),
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
STAGES = explained_by(RANKING_STEPS)
