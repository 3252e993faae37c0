"""Stage 1, continued: a question's parts, read from its syntax alone.

A question whose answer needs several memories often says so in its grammar: "between X and
Y", "did X happen before Y", "how many weeks after X did Y", "X or Y", "X and Y". Each
conjunct is searched on its own (lever `query_parts`; lever `event_order` for time-ordering
questions), so that the memory of one event is not crowded out of the top k by the other's.

Only the question's own words decide: connectives and auxiliaries, never a list of topics.
A part keeps enough of the question to stand alone (a bare noun conjunct borrows the verb of
the other side), and a part left with nothing but function words is no part.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from app.retrieval.function_words import FUNCTION_WORDS, WORD

MAX_PARTS = 3

# "between X and Y" (the span ends at a clause boundary or the question mark).
BETWEEN = re.compile(r"\bbetween\s+(?P<a>.+?)\s+and\s+(?P<b>.+?)\s*(?:[?.!;]|$)", re.I)
# The connective that joins two events in time.
TEMPORAL_LINK = re.compile(r"\s+(?:before|after|prior to|following)\s+", re.I)
# Alternatives at the end of a question: "..., X or Y?" and "X or Y?".
ALTERNATIVE = re.compile(r"\s+or\s+", re.I)
COORDINATION = re.compile(r",?\s+(?:and|as well as|and also|plus)\s+", re.I)
COMPARISON = re.compile(r"\s+(?:compared (?:to|with)|versus|vs\.?|than)\s+", re.I)
# "How many weeks", "how long": what a time question asks, no event of its own.
HOW_MUCH_TIME = re.compile(r"^\s*how\s+(?:long|many\s+\w+|much\s+\w+)", re.I)
# An inverted auxiliary opens the second clause of "how many weeks after X did Y".
CLAUSE_AUXILIARY = re.compile(
    r"\s+(?:did|does|do|was|were|is|are|had|has|have|will|would)\s+", re.I
)
# Questions about the order of events or the time between them.
ORDER_QUESTION = re.compile(
    r"\b(?:which|what|who)\b.*\b(?:first|earlier|later|last|sooner)\b"
    r"|\bhow (?:long|many (?:days|weeks|months|years|hours|minutes))\b"
    r".*\b(?:between|after|before|since|until)\b"
    r"|\b(?:before|after|prior to)\b",
    re.I,
)
# Which/what and the words after it: a plural noun there asks for a list ("which books",
# "what kinds of art", "what outdoor activities").
LIST_HEAD = re.compile(r"\b(?:which|what)\s+(\w+)(?:\s+(\w+))?", re.I)


@dataclass(frozen=True, slots=True)
class QueryParts:
    """The parts of a question, how they were found, and whether it asks about order."""

    parts: tuple[str, ...] = ()
    kind: str | None = None  # between, temporal, alternative, comparison, coordination
    asks_order: bool = False
    asks_list: bool = False


def content_words(text: str) -> list[str]:
    return [w for w in WORD.findall(text) if w.lower() not in FUNCTION_WORDS]


def asks_for_list(text: str) -> bool:
    """Which/what followed (within two words) by a plural noun that is no function word."""
    if (match := LIST_HEAD.search(text)) is None:
        return False
    return any(
        word is not None
        and word.lower() not in FUNCTION_WORDS
        and len(word) > 3
        and word.lower().endswith("s")
        and not word.lower().endswith("ss")
        for word in match.groups()
    )


def tidy(text: str) -> str:
    return " ".join(text.strip(" ,;:?.!").split())


def standalone(left: str, right: str) -> tuple[str, str]:
    """A short right conjunct ("hiking and camping") borrows the words before the left's last
    one: "does she like hiking" / "does she like camping"."""
    right_words = right.split()
    left_words = left.split()
    if len(right_words) <= 2 and len(left_words) > len(right_words):
        return left, " ".join([*left_words[: -len(right_words)], *right_words])
    return left, right


def split_at(text: str, pattern: re.Pattern[str]) -> list[str]:
    return [tidy(p) for p in pattern.split(text) if tidy(p)]


def with_subject(parts: list[str]) -> tuple[str, ...]:
    """Parts that say something (not only function words), at most MAX_PARTS, unique."""
    kept: list[str] = []
    for part in parts:
        if content_words(part) and part.lower() not in (k.lower() for k in kept):
            kept.append(part)
    return tuple(kept[:MAX_PARTS])


def temporal_parts(text: str) -> list[str]:
    """ "did X happen before Y" -> X, Y; "how many weeks after X did Y" -> X, Y."""
    pieces = TEMPORAL_LINK.split(text, maxsplit=1)
    if len(pieces) != 2:
        return []
    left, right = pieces
    if content_words(HOW_MUCH_TIME.sub("", left)):
        return [left, right]
    # The left is only "how many weeks": the inverted auxiliary opens the second event.
    inner = CLAUSE_AUXILIARY.split(right, maxsplit=1)
    return inner if len(inner) == 2 else []


def split_query(query: str) -> QueryParts:
    """The question's parts (two or three, each searchable alone) or none."""
    text = tidy(query)
    asks_order = ORDER_QUESTION.search(text) is not None
    asks_list = asks_for_list(text)
    found: list[str] = []
    kind: str | None = None
    if match := BETWEEN.search(text):
        found, kind = [match["a"], match["b"]], "between"
    elif len(pieces := temporal_parts(text)) == 2:
        found, kind = pieces, "temporal"
    elif len(pieces := split_at(text.rsplit(",", 1)[-1], ALTERNATIVE)) >= 2:
        found, kind = pieces, "alternative"
    elif len(pieces := split_at(text, COMPARISON)) >= 2:
        found, kind = pieces, "comparison"
    elif len(pieces := split_at(text, COORDINATION)) >= 2:
        found, kind = pieces, "coordination"
    if len(found) == 2:
        found = list(standalone(tidy(found[0]), tidy(found[1])))
    parts = with_subject([tidy(p) for p in found])
    if len(parts) < 2:
        return QueryParts(asks_order=asks_order, asks_list=asks_list)
    return QueryParts(parts, kind, asks_order, asks_list)
