"""A memory's sentences, each embedded on its own beside the whole.

A turn that tells three things ("Thanks! I just signed up for a pottery class. The kids love
the dinosaur museum.") has one vector for all three: their average, which is near none of the
questions asked after one of them. The store embeds each sentence of a memory that has several
(`sentence_embeddings_768d`) and the vector leg scores the memory by the best of them, beside
its content's and context's own (lever `sentence_vector`, app/retrieval/legs.py). Measured on
LoCoMo conversations 1-2 in docs/benchmarks/locomo.md.

Sentences end at `.`, `!` or `?` followed by a capitalised word; a piece shorter than
MIN_WORDS words ("Wow, Caroline!") joins the next one, so greetings and exclamations get no
vector of their own. A memory of one sentence gets none: its content's vector is that
sentence's. At most MAX_SENTENCES per memory (the rest are in the content's vector only), so a
long memory costs the write path a bounded number of embeddings.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from app.memories.context import turn_line

SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(]?[A-Z])")
MIN_WORDS = 4
MAX_SENTENCES = 12


def split_sentences(text: str) -> list[str]:
    """The text's sentences, short pieces joined to the next (the last to the one before)."""
    return join_short(SENTENCE_END.split(text.strip()), lambda s: len(s.split()) < MIN_WORDS)


def join_short(
    pieces: Iterable[str], too_short: Callable[[str], bool], separator: str = " "
) -> list[str]:
    """The pieces, each one `too_short` joined to the next (the last to the one before)."""
    merged: list[str] = []
    carry = ""
    for piece in pieces:
        sentence = f"{carry}{separator}{piece}".strip() if carry else piece.strip()
        if too_short(sentence):
            carry = sentence
            continue
        merged.append(sentence)
        carry = ""
    if carry:
        if merged:
            merged[-1] = f"{merged[-1]}{separator}{carry}"
        else:
            merged.append(carry)
    return merged


def sentence_texts(content: str, speaker: str | None) -> list[str]:
    """What the sentence vectors embed: each sentence as a line of the transcript ("Speaker:
    sentence"), or nothing for a memory of one sentence."""
    found = split_sentences(content)
    if len(found) < 2:
        return []
    return [turn_line(sentence, speaker) for sentence in found[:MAX_SENTENCES]]
