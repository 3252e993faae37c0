"""The question in the user's own person, for the vectors (lever `first_person`).

A user's memories are told in the first person ("I moved to Osaka", "my sister is a
nurse"); an agent asks about that user in the second or third person ("Which city are you
in?", "What does she do for a living?"). A sentence model places "she" and "I" apart, so a
memory that answers can score below one that merely shares the question's person. The lever
embeds the question with its second- and third-person singular pronouns turned into the
first person ("What does I do for a living?": the model reads past the agreement); BM25
still searches the words as asked, where "I" and "my" would match nearly every memory.

The pronouns are a closed grammatical class of English, not words chosen for a data set;
a question without them (or in another language) is embedded as it is.
"""

from __future__ import annotations

import re

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
_PRONOUN = re.compile(r"(?<![\w'\u2019])(" + "|".join(_FIRST) + r")(?![\w'\u2019])", re.IGNORECASE)


def in_first_person(question: str) -> str:
    """The question with its second- and third-person singular pronouns in the first
    person; the question itself where it has none."""
    return _PRONOUN.sub(lambda found: _FIRST[found.group(1).lower()], question)
