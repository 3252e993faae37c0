"""Words that carry no subject of their own: question words, auxiliaries, pronouns,
prepositions and request verbs ("tell", "describe"). Entities are never these; a query left
with only these once the speakers' names are gone has lost its subject."""

from __future__ import annotations

import re

FUNCTION_WORDS = frozenset(
    """
    a an the and or but if so then also what which who whom whose when where why how did
    does do is are was were has have had can could would should will shall may might must i
    i'm i've i'd my me we our you your he she they his her their its it this that these
    those there here in on at for of to from by with about after before during since
    considering based according given tell describe name list please yes no hey hi
    """.split()  # noqa: SIM905 (a word list reads better as text)
)
WORD = re.compile(r"[\w'\u2019]+")


def has_subject(text: str) -> bool:
    """Whether any word of the text is more than a function word."""
    return any(word.lower() not in FUNCTION_WORDS for word in WORD.findall(text))
