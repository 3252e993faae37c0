"""Entities (lever `entities`): the names a query mentions — people, places, organisations,
titles — and which candidates mention them too.

A light, offline extractor: quoted titles, and runs of capitalised words ("New York", "The
Name of the Wind", "LGBTQ"), without the function word a question starts with ("What",
"When", "Did"). A speaker's name is left to the speaker lever. Memories are matched on their
text (content and context), case-insensitively and as whole words, so nothing needs storing
or re-indexing; only candidates the caller may already see are read.

    score(m) = score(m) x (1 + boost x shared(m) / named)

where `named` is the number of entities in the query and `shared(m)` how many of them m's
text mentions. A question about two things ("What do Paris and Rome have in common?") thus
prefers memories that mention both, then either.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from app.memories.entities import EntityRepository
from app.retrieval.candidates import Candidate, boost_scores, rank_by_score
from app.retrieval.function_words import FUNCTION_WORDS
from app.retrieval.plan import Lever, Tuning
from app.retrieval.speakers import name_pattern, named_speakers
from app.retrieval.steps import SearchContext, Step

# Lower-case words allowed inside a run of capitalised ones: "The Name of the Wind".
JOINERS = frozenset({"of", "the", "de", "la", "van", "von"})
QUOTED = re.compile(r"[\"“”]([^\"“”]{2,80})[\"“”]")
WORD = re.compile(r"[A-Za-z0-9][\w'\u2019&.-]*")
SENTENCE_END = re.compile(r"[.!?]\s+")


def is_capitalised(word: str) -> bool:
    return word[0].isupper() or (len(word) > 1 and word.isupper())


def sentence_spans(sentence: str) -> list[str]:
    words = [w.rstrip(".'\u2019") for w in WORD.findall(sentence)]
    spans: list[str] = []
    run: list[str] = []
    for position, word in enumerate(words):
        if not word:
            continue
        if (
            is_capitalised(word)
            and not (position == 0 and word.lower() in FUNCTION_WORDS)
            and word.lower() not in ("i", "i'm", "i've", "i'd", "i'll")
        ):
            run.append(word)
            continue
        if run and word.lower() in JOINERS:
            run.append(word)
            continue
        spans.append(" ".join(run))
        run = []
    spans.append(" ".join(run))
    result = []
    for span in spans:
        words_in = span.split()
        while words_in and words_in[-1].lower() in JOINERS:  # "Name of" -> "Name"
            words_in.pop()
        if words_in:
            result.append(" ".join(words_in))
    return result


def query_entities(query: str, speakers: Iterable[str] = ()) -> list[str]:
    """The entities a query names, in order, without duplicates or the given speakers."""
    found = [m.strip() for m in QUOTED.findall(query)]
    unquoted = QUOTED.sub(" ", query)
    for sentence in SENTENCE_END.split(unquoted):
        found.extend(sentence_spans(sentence))
    speakers = [s for s in speakers if s]
    entities: list[str] = []
    for entity in found:
        if named_speakers(entity, speakers) and len(entity.split()) == 1:
            continue
        if entity.lower() in FUNCTION_WORDS:
            continue
        if entity.lower() not in (e.lower() for e in entities):
            entities.append(entity)
    return entities


def names_something(query: str, speakers: Iterable[str] = ()) -> bool:
    """Whether the query names an entity or a number (lever typed_weights: a lexical query)."""
    return bool(query_entities(query, speakers)) or re.search(r"\d", query) is not None


def mentions(text: str, entity: str) -> bool:
    return re.search(name_pattern(entity), text, re.IGNORECASE) is not None


def boost_shared_entities(
    query: str, ranked: list[Candidate], boost: float
) -> tuple[list[Candidate], list[str]]:
    """Re-rank by the share of the query's entities each candidate's text mentions. Returns
    the list and the entities (none: the list unchanged)."""
    entities = query_entities(query, {c.speaker for c in ranked if c.speaker})
    if not entities:
        return ranked, entities

    def factor(candidate: Candidate) -> float:
        shared = sum(1 for entity in entities if mentions(candidate.text, entity))
        return 1.0 + boost * shared / len(entities)

    return boost_scores(ranked, factor, "entities"), entities


# --- The entity hop (lever `entity_hop`) ---------------------------------------------------
#
# Memories that name an entity (0039, app/memories/entities.py) the query names or one of the
# first `top_n` hits names join the candidates: one hop, at most `limit` of them, those naming
# the most of these entities first. A joined memory scores `decay` times the best score of a
# hit that shares an entity with it (the first hit's, for an entity the query names), so it
# enters below what led to it. An entity named by more than `max_memories` of the user's
# memories links nothing (the user's own name, a home town on every page).

ENTITY_HOP = Lever(
    "entity_hop",
    "Memories that name an entity (people, places, organisations, ...: docs/entities.md) "
    "that the query or one of the top hits names join the candidates, one hop, at most "
    "COGNIS_ENTITY_HOP_LIMIT, with a decayed share of the linking hit's score.",
)


@dataclass(frozen=True, slots=True)
class Hop:
    top_n: int  # the hits whose entities are followed
    max_memories: int  # an entity named by more of the user's memories links nothing
    limit: int  # memories brought in at most
    decay: float  # the linking hit's share of score


HOP = Tuning(
    "entity_hop",
    lambda basis: Hop(
        basis.settings.entity_hop_top_n,
        basis.settings.entity_hop_max_memories,
        basis.settings.entity_hop_limit,
        basis.settings.entity_hop_decay,
    ),
)


def seed_scores(
    head: list[Candidate],
    hit_entities: dict[uuid.UUID, list[uuid.UUID]],
    query_entity_ids: Iterable[uuid.UUID],
) -> dict[uuid.UUID, float]:
    """Each entity to follow, with the best score of a hit that names it (the first hit's
    for an entity the query names)."""
    seeds: dict[uuid.UUID, float] = {}
    top = head[0].score if head else 0.0
    for entity_id in query_entity_ids:
        seeds[entity_id] = top
    for hit in head:
        for entity_id in hit_entities.get(hit.memory_id, []):
            seeds[entity_id] = max(seeds.get(entity_id, 0.0), hit.score)
    return seeds


async def entity_hop(
    ranked: list[Candidate], context: SearchContext
) -> tuple[list[Candidate], str]:
    hop, request = context.plan.numbers(HOP), context.request
    store = EntityRepository(context.repository.session, context.repository.where)
    head = ranked[: hop.top_n]
    names = query_entities(request.query, {c.speaker for c in ranked if c.speaker})
    limit = hop.max_memories
    query_ids = await store.named(request.user_id, names, limit) if names else []
    hit_entities = await store.entities_of(request.user_id, [c.memory_id for c in head], limit)
    seeds = seed_scores(head, hit_entities, query_ids)
    if not seeds:
        return ranked, "no entity to follow"
    joined = await store.linked(
        request.user_id,
        list(seeds),
        request.session_id,
        exclude=[c.memory_id for c in ranked],
        limit=hop.limit,
    )
    decay = hop.decay
    for memory, entity_ids in joined:
        score = decay * max(seeds[e] for e in entity_ids)
        ranked.append(Candidate(memory_id=memory.id, score=score).load(memory))
    return rank_by_score(ranked, "entity_hop"), f"{len(joined)} joined via {len(seeds)} entities"


STEP = Step(
    "entity_hop", entity_hop, timer="entity_hop_ms", lever=ENTITY_HOP, explains="entity_hop"
)
