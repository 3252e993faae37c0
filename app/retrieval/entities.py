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
from collections.abc import Iterable

from app.retrieval.candidates import Candidate, boost_scores
from app.retrieval.function_words import FUNCTION_WORDS
from app.retrieval.speakers import name_pattern, named_speakers

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
