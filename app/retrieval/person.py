"""The question in the user's own person, for the vectors (lever `first_person`).

A user's memories are told in the first person ("I moved to Osaka", "my sister is a
nurse"); an agent asks about that user in the second or third person ("Which city are you
in?", "What does she do for a living?"). A sentence model places "she" and "I" apart, so a
memory that answers can score below one that merely shares the question's person. The lever
embeds the question with its second- and third-person singular pronouns turned into the
first person ("What does I do for a living?": the model reads past the agreement); BM25
still searches the words as asked, where "I" and "my" would match nearly every memory.

The pronouns are a closed grammatical class of English, not words chosen for a data set;
a question without them (or in another language) is embedded as it is. A search filtered to
an entity asks about that entity: "she" in "What does she do?" filtered to Melanie is
Melanie, so there only the second person ("you": the user, addressed) is turned.
"""

from __future__ import annotations

import re

from app.memories.filters import AllOf, AnyOf, Clause, Filter

# Second and third person singular → first person. "her" is both object and possessive;
# "my" serves both for a sentence model.
_FIRST = {
    "you": "I",
    "your": "my",
    "yours": "mine",
    "yourself": "myself",
    "she": "I",
    "he": "I",
    "her": "my",
    "his": "my",
    "him": "me",
    "hers": "mine",
    "herself": "myself",
    "himself": "myself",
}
_SECOND = frozenset({"you", "your", "yours", "yourself"})


def _pronouns(words: list[str]) -> re.Pattern[str]:
    return re.compile(r"(?<![\w'\u2019])(" + "|".join(words) + r")(?![\w'\u2019])", re.IGNORECASE)


_PRONOUN = _pronouns(list(_FIRST))
_SECOND_PERSON = _pronouns(sorted(_SECOND))


def in_first_person(question: str, *, third_person: bool = True) -> str:
    """The question with its second- and (unless `third_person` is False) third-person
    singular pronouns in the first person; the question itself where it has none."""
    pattern = _PRONOUN if third_person else _SECOND_PERSON
    return pattern.sub(lambda found: _FIRST[found.group(1).lower()], question)


def about_an_entity(tree: Filter | None) -> bool:
    """Whether the filter keeps only memories that name a given entity (an `entity` clause
    with eq or in that every match must meet): its third-person pronouns are that entity."""
    if isinstance(tree, Clause):
        return tree.field == "entity" and tree.op in ("eq", "in")
    if isinstance(tree, AllOf):
        return any(about_an_entity(part) for part in tree.filters)
    if isinstance(tree, AnyOf):
        return bool(tree.filters) and all(about_an_entity(part) for part in tree.filters)
    return False  # Not: memories that do not name it
