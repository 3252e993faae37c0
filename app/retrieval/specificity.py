"""Specific memories first: a prior from how rare a memory's words are among its user's own.

A conversation is full of turns that tell nothing in particular ("Thanks, that means a lot!",
"Family is so important to me"): they are made of the words the user says all the time, and
their vectors sit near any question about the user's life, so they crowd the head of the
results. A turn that tells a fact names something the user rarely mentions (a class, a
place, a title). The lever `specificity` weighs that: a memory's **specificity** is the mean
of the inverse document frequencies of its rarest words (`SPECIFICITY_WORDS`, 5), counted
over the user's own current memories (at most `SPECIFICITY_SAMPLE`, 500, in the fixed order
of their ids, which are random); its score is multiplied by `1 + boost * z`, z being its
specificity in standard deviations of the user's (clipped to ±2).

Statistics of a few memories say little: with a dozen, a word's document frequency is 0 or 1
and z mostly counts words. So the boost is shrunk by the user's evidence, not cut off at a
size: `boost * n / (n + prior)` for a user of n memories (`SPECIFICITY_PRIOR`), which fades
to nothing for a new user and to nearly the whole boost for one with hundreds.

No word list and nothing about the query: the statistics are the user's own words, so a
topic the user talks about all the time is not specific for them. They are statistics only
(counts of words, never shown) of the same user's memories, cached per tenant and user for
`SPECIFICITY_TTL_S`; a search never reads another user's.
"""

from __future__ import annotations

import math
import re
import time
import uuid
from collections import Counter, OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from statistics import fmean, pstdev

from app.retrieval.candidates import Candidate, boost_scores

# A word: letters of any script, with inner apostrophes ("don't", "Charlotte's").
_WORD = re.compile(r"[^\W\d_]+(?:['\u2019][^\W\d_]+)*")
# |z| beyond this is not more specific, only rarer (a typo is the rarest word of all).
Z_LIMIT = 2.0


def words(text: str) -> set[str]:
    """The distinct words of a text, lower-cased."""
    return {w.replace("\u2019", "'") for w in _WORD.findall(text.lower())}


@dataclass(frozen=True, slots=True)
class WordRarity:
    """Document frequencies of words over a user's memories, and the spread of specificity
    among them."""

    documents: int
    frequency: dict[str, int]
    rarest: int
    mean: float
    spread: float

    @classmethod
    def of(cls, texts: Sequence[str], rarest: int) -> WordRarity:
        sets = [words(t) for t in texts]
        counted = cls(len(sets), dict(Counter(w for s in sets for w in s)), rarest, 0.0, 0.0)
        values = [counted.specificity_of(s) for s in sets]
        if not values:
            return counted
        return replace(counted, mean=fmean(values), spread=pstdev(values))

    def idf(self, word: str) -> float:
        """ln((N + 1) / (df + 0.5)): a word in no sampled memory is the rarest there is."""
        return math.log((self.documents + 1) / (self.frequency.get(word, 0) + 0.5))

    def specificity_of(self, distinct: Iterable[str]) -> float:
        """Mean idf of the `rarest` rarest words (0 for a text without words)."""
        idfs = sorted((self.idf(w) for w in distinct), reverse=True)[: self.rarest]
        return sum(idfs) / len(idfs) if idfs else 0.0

    def weight(self, prior: float) -> float:
        """How much of the boost these statistics earn: n / (n + prior) for n memories."""
        return self.documents / (self.documents + prior) if self.documents else 0.0

    def z(self, text: str) -> float:
        """The text's specificity in standard deviations of the user's, within ±Z_LIMIT; 0
        where the user's memories do not vary (too few to tell)."""
        if self.spread <= 0:
            return 0.0
        z = (self.specificity_of(words(text)) - self.mean) / self.spread
        return max(-Z_LIMIT, min(Z_LIMIT, z))


def boost_specific(
    ranked: list[Candidate], rarity: WordRarity, boost: float, prior: float
) -> list[Candidate]:
    """Multiply each candidate's score by 1 + boost * weight * z of its content (the boost
    shrunk by the user's evidence, `WordRarity.weight`), and re-rank."""
    shrunk = boost * rarity.weight(prior)
    return boost_scores(ranked, lambda c: 1.0 + shrunk * rarity.z(c.content), "specificity")


Key = tuple[uuid.UUID | None, str]


class WordRarityCache:
    """Each user's WordRarity for `ttl_s` seconds, for at most `users` users (least recently
    used leave first). Keyed by tenant and user: the same user id in two tenants is two users."""

    def __init__(self, ttl_s: float, users: int = 1024) -> None:
        self._ttl_s = ttl_s
        self._users = users
        self._entries: OrderedDict[Key, tuple[float, WordRarity]] = OrderedDict()

    async def get(
        self, key: Key, rarest: int, sample: Callable[[], Awaitable[list[str]]]
    ) -> WordRarity:
        now = time.monotonic()
        entry = self._entries.get(key)
        if entry is not None and now - entry[0] < self._ttl_s and entry[1].rarest == rarest:
            self._entries.move_to_end(key)
            return entry[1]
        rarity = WordRarity.of(await sample(), rarest)
        self._entries[key] = (now, rarity)
        self._entries.move_to_end(key)
        while len(self._entries) > self._users:
            self._entries.popitem(last=False)
        return rarity
