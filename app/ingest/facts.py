"""Facts from a message without an LLM: its units, and which of them state a fact.

A user message becomes one memory per fact it states about the user or the people they name,
each in the user's own words. `fact_units` cuts the message into candidate units (sentences,
each an exact substring of the message); the `FactModel`, a logistic regression over a unit's
768D embedding and a few lexical cues, keeps the units that state a fact and drops greetings,
thanks, questions and requests to the assistant, small talk and reactions. A request that tells
something ("Can you suggest recipes for my daughter, she's 7?") is a fact: a unit judged "not
a fact" is never a memory, so the threshold is chosen for recall at a precision floor.

Trained and measured by `python -m bench.facts` (docs/benchmarks/facts.md); the weights ship
as app/ingest/fact_model.json.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from app.memories.sentences import MAX_SENTENCES

MODEL_PATH = Path(__file__).with_name("fact_model.json")

# Japanese (kana or kanji): kept whole, the English cuts and cues do not read it.
JAPANESE = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff]")
# A candidate end of sentence: terminators (and closing quotes or brackets) before a space.
SENTENCE_END = re.compile(r"(?:[.!?]+|;)[\"'\u2019\u201d)\]]*(?=\s)")
# Words a period does not end (titles, Latin, units); "a.m."/"p.m." end one only before a
# capital. Lowercase, without their periods.
ABBREVIATIONS = frozenset(
    re.findall(
        r"\w+",
        "dr mr mrs ms mx prof sr jr st mt ft vs etc eg ie approx appt dept est no nos vol "
        "fig inc ltd co corp jan feb mar apr jun jul aug sep sept oct nov dec mon tue wed "
        "thu fri sat sun ave blvd rd min max oz lb lbs pt hr hrs wk yr yrs cf al",
    )
)
TIME_ABBREVIATIONS = frozenset({"am", "pm"})
LAST_WORD = re.compile(r"(\S+)$")


def fact_units(content: str) -> list[str]:
    """The message's candidate units, in order, each an exact substring of `content` (stripped).

    A unit ends at a line break, at `.` `!` `?` or `;` before a space (whatever the next word's
    case, chat is often lowercase), except after an abbreviation ("Dr.", "e.g.", "St."), an
    initial ("J. K."), a list number ("1.") or an ellipsis before a lowercase word; a decimal
    ("3.5") has no space after its point. Short pieces ("Hi!", "Thanks!") stay units of their
    own, never glued to the next fact; but a short piece that leans on the one before ("I've
    started eating fish again. So pescatarian I guess.", "I moved to Leeds. Settled in now.")
    stays with it (`_leans_back`): alone it says nothing. Japanese text is returned whole. At
    most MAX_SENTENCES units: the last one runs from its start to the message's end (tail
    kept, in one unit)."""
    text = content.strip()
    if not text:
        return []
    if JAPANESE.search(text):
        return [text]
    spans: list[tuple[int, int]] = []
    for line in re.finditer(r"[^\n]+", content):
        for start, end in _sentence_spans(content, line.start(), line.end()):
            before = spans[-1] if spans and spans[-1][0] >= line.start() else None
            if before is not None and _leans_back(content[start:end], content[slice(*before)]):
                spans[-1] = (spans[-1][0], end)
            else:
                spans.append((start, end))
    if len(spans) > MAX_SENTENCES:
        spans = [*spans[: MAX_SENTENCES - 1], (spans[MAX_SENTENCES - 1][0], spans[-1][1])]
    return [content[start:end] for start, end in spans]


# A piece of fewer words than this, with no subject of its own, leans on the piece before.
LEANING_WORDS = 6
OWN_SUBJECT = re.compile(r"^\W*(?:i|i'm|i've|i'd|i'll|we|we're|we've|my|our|me)\b")


def _leans_back(piece: str, before: str) -> bool:
    """Whether `piece` is a short statement without a subject of its own ("So pescatarian I
    guess.", "Down to 2 now.", "Beach 10 minutes away.") after a statement (`before`, on its
    line): neither is a question, greeting, thanks, request or reaction."""
    lower = piece.lower().replace("\u2019", "'")
    return (
        len(lower.split()) < LEANING_WORDS
        and OWN_SUBJECT.search(lower) is None
        and _states(lower)
        and _states(before.lower().replace("\u2019", "'"))
    )


def _states(lower: str) -> bool:
    """Neither a question nor a greeting, thanks, request or reaction."""
    return (
        "?" not in lower
        and GREETING_OR_THANKS.search(lower) is None
        and REQUEST_OPENING.search(lower) is None
        and REACTION.search(lower) is None
    )


def _sentence_spans(content: str, start: int, end: int) -> list[tuple[int, int]]:
    """The stripped spans of the sentences of content[start:end] (one line)."""
    cuts: list[int] = []
    for match in SENTENCE_END.finditer(content, start, end):
        if _ends_sentence(content, start, match):
            cuts.append(match.end())
    spans = []
    for a, b in zip([start, *cuts], [*cuts, end], strict=True):
        piece = content[a:b]
        left = len(piece) - len(piece.lstrip())
        right = len(piece.rstrip())
        if right > left:
            spans.append((a + left, a + right))
    return spans


def _ends_sentence(content: str, line_start: int, match: re.Match[str]) -> bool:
    mark = match.group()
    if mark.startswith((";", "!", "?")):
        return True
    following = content[match.end() :].lstrip()[:1]
    if mark.startswith("..") and not following.isupper():
        return False  # "I was thinking... maybe": one thought
    before = content[line_start : match.start()]
    found = LAST_WORD.search(before)
    if found is None:
        return False
    word = found.group(1).lstrip("\"'(").lower()
    bare = word.replace(".", "")
    if bare in TIME_ABBREVIATIONS and "." in word:  # "5 p.m. Then": ends before a capital
        return following.isupper()
    if bare in ABBREVIATIONS or (len(bare) <= 2 and "." in word):  # "Dr.", "e.g.", "U.S."
        return following.isupper() and bare not in TITLES and bare not in {"eg", "ie"}
    if len(bare) == 1 and bare.isalpha() and bare != "i" and before.rstrip()[-2:-1] in " (":
        return False  # an initial: "J. K. Rowling"
    # not a list number at the start of the line: "1. Pack light"
    return not (bare.isdigit() and not before[: found.start()].strip())


# Titles never end a sentence, whatever follows ("Dr. Patel", "St. Louis").
TITLES = frozenset({"dr", "mr", "mrs", "ms", "mx", "prof", "st", "mt", "ft", "no", "vs"})

# The lexical cues beside the embedding, in the model's order (see `unit_cues`).
CUES = (
    "first_person",
    "my_people",
    "question_mark",
    "request_opening",
    "second_person",
    "greeting_or_thanks",
    "reaction",
    "has_number",
    "has_date",
    "log_words",
)
FIRST_PERSON = re.compile(r"\b(i|i'm|i've|i'd|i'll|me|my|mine|myself|we|we're|we've|our|us)\b")
MY_PEOPLE = re.compile(
    r"\b(my|our)\s+(?:\w+\s+)?(wife|husband|partner|boyfriend|girlfriend|fianc[eé]e?|son|"
    r"daughter|kids?|children|child|baby|mom|mum|mother|dad|father|parents?|brother|sister|"
    r"siblings?|cousin|aunt|uncle|grandma|grandpa|grandmother|grandfather|niece|nephew|"
    r"friends?|roommate|boss|colleagues?|coworkers?|team|neighbou?r|dog|cat|puppy|pets?)\b"
)
REQUEST_OPENING = re.compile(
    r"^\W*(can|could|would|will|should|do|does|did|is|are|was|were|what|what's|how|why|"
    r"where|when|which|who|whom|whose|please|recommend|suggest|give|tell|help|show|list|"
    r"explain|describe|write|make|create|find|compare|summari[sz]e|any|i\s+(?:need|want|"
    r"would\s+like|was\s+wondering)\s+(?:you\s+to|some|a\s+list|help|advice|tips|ideas|"
    r"suggestions|recommendations))\b"
)
SECOND_PERSON = re.compile(r"\b(you|your|you're|you've)\b")
GREETING_OR_THANKS = re.compile(
    r"\b(hi|hello|hey|thanks|thank|thx|cheers|bye|goodbye|morning|evening|appreciate)\b"
)
REACTION = re.compile(
    r"^\W*(ok|okay|great|awesome|cool|nice|wow|perfect|sounds|that's|that|this|yes|yeah|no|"
    r"sure|got\s+it|interesting|amazing|lol|haha|hmm|oh|ah|good|excellent|fantastic)\b"
)
NUMBER = re.compile(r"\d")
DATE = re.compile(
    r"\b(january|february|march|april|may|june|july|august|september|october|november|"
    r"december|monday|tuesday|wednesday|thursday|friday|saturday|sunday|yesterday|today|"
    r"tomorrow|tonight|weekend|last\s+(?:week|month|year|night)|next\s+(?:week|month|year)|"
    r"ago|since|until|recently|just)\b"
)


def unit_cues(unit: str) -> list[float]:
    """A unit's lexical cues, in the order of CUES: whom it is about (I/we, "my daughter"),
    whether it asks (question mark, a request's opening word, "you"), whether it greets,
    thanks or reacts, whether it holds a number or a time word, and its length."""
    lower = unit.lower().replace("\u2019", "'")
    words = len(lower.split())
    return [
        float(bool(FIRST_PERSON.search(lower))),
        float(bool(MY_PEOPLE.search(lower))),
        float("?" in lower),
        float(bool(REQUEST_OPENING.search(lower))),
        float(bool(SECOND_PERSON.search(lower))),
        float(bool(GREETING_OR_THANKS.search(lower))),
        float(bool(REACTION.search(lower))),
        float(bool(NUMBER.search(lower))),
        float(bool(DATE.search(lower))),
        float(np.log1p(words)),
    ]


def unit_features(units: Sequence[str], vectors: np.ndarray) -> np.ndarray:
    """The model's input rows: each unit's embedding, then its cues."""
    cues = np.asarray([unit_cues(u) for u in units], dtype=np.float64).reshape(len(units), -1)
    return np.hstack([np.asarray(vectors, dtype=np.float64).reshape(len(units), -1), cues])


@dataclass(frozen=True, slots=True)
class FactJudgement:
    """One unit's verdict, with what the decision's reason shows."""

    unit: str
    score: float
    threshold: float
    # A plain statement the user makes about themselves (`said_of_self`): a fact whatever
    # the score.
    of_self: bool = False

    @property
    def is_fact(self) -> bool:
        return self.score >= self.threshold or self.of_self

    @property
    def reason(self) -> str:
        verdict = "fact" if self.is_fact else "not a fact"
        sign = ">=" if self.score >= self.threshold else "<"
        said = "said of oneself, " if self.of_self and self.score < self.threshold else ""
        return f"{verdict}: {said}score {self.score:.2f} {sign} threshold {self.threshold:.2f}"


# "I think", "I wonder", "I'd like": the opening of an opinion or a request, not a fact.
NOT_OF_SELF = re.compile(
    r"^\W*(?:i|we)\s*(?:'d|'ll|think|guess|wonder|hope|wish|mean|see|agree|understand|know|"
    r"feel like|suppose|'m not sure|am not sure|was wondering|would|will|could|can|should|"
    r"need you|want you|like that|love that|like this|love this|like it|love it)\b"
)


def said_of_self(unit: str) -> bool:
    """A plain statement whose subject is the user ("I started learning Rust", "We keep bees",
    "My sister lives in Porto"): not a question, greeting, thanks, request, reaction, or an
    opinion or wish opening ("I think ...", "I'd like ...")."""
    lower = unit.lower().replace("\u2019", "'")
    return (
        OWN_SUBJECT.search(lower) is not None
        and NOT_OF_SELF.search(lower) is None
        and "?" not in lower
        and THANKS.search(lower) is None  # "morning" may be a time of day here, not a greeting
        and REQUEST_OPENING.search(lower) is None
        and REACTION.search(lower) is None
    )


THANKS = re.compile(r"\b(?:thanks|thank|thx|appreciate)\b")


@dataclass(frozen=True, slots=True)
class FactModel:
    """Standardised features (the embedding's dimensions, then CUES), one weight each, a bias.
    `threshold`: the shipped default P(fact) at or above which a unit is a fact.
    `embedding_model`: the embedder whose unit vectors it reads (`Path(setting).name`)."""

    mean: np.ndarray
    scale: np.ndarray
    weights: np.ndarray
    bias: float
    threshold: float
    embedding_model: str
    dimensions: int = 768

    def reads(self, embedding_model_setting: str) -> bool:
        """Whether the service's embedder (settings.embedding_model) is the one it was trained
        on: another embedder's vectors mean nothing to its weights."""
        return Path(embedding_model_setting).name == self.embedding_model

    def scores(self, units: Sequence[str], vectors: np.ndarray) -> np.ndarray:
        """P(fact) per unit; `vectors`: the units' unit-normalised embeddings, shape (n, 768)."""
        if not units:
            return np.zeros(0)
        x = unit_features(units, vectors)
        z = ((x - self.mean) / self.scale) @ self.weights + self.bias
        return 1.0 / (1.0 + np.exp(-z))

    def judge(
        self, units: Sequence[str], vectors: np.ndarray, threshold: float | None = None
    ) -> list[FactJudgement]:
        """Each unit's score against the threshold (the shipped one unless given)."""
        t = self.threshold if threshold is None else threshold
        return [
            FactJudgement(u, float(s), t, said_of_self(u))
            for u, s in zip(units, self.scores(units, vectors), strict=True)
        ]

    def is_fact(
        self, units: Sequence[str], vectors: np.ndarray, threshold: float | None = None
    ) -> list[bool]:
        return [j.is_fact for j in self.judge(units, vectors, threshold)]

    def facts(
        self, units: Sequence[str], vectors: np.ndarray, threshold: float | None = None
    ) -> list[str]:
        """The units that state a fact, in order."""
        return [j.unit for j in self.judge(units, vectors, threshold) if j.is_fact]

    def to_json(self) -> dict[str, object]:
        return {
            "features": [f"embedding_{i}" for i in range(self.dimensions)] + list(CUES),
            "mean": [round(float(v), 6) for v in self.mean],
            "scale": [round(float(v), 6) for v in self.scale],
            "weights": [round(float(v), 6) for v in self.weights],
            "bias": round(self.bias, 6),
            "threshold": round(self.threshold, 4),
            "embedding_model": self.embedding_model,
            "dimensions": self.dimensions,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FactModel:
        dimensions = int(data["dimensions"])
        if list(data["features"])[dimensions:] != list(CUES):
            raise ValueError("fact model was trained on other cues: retrain it")
        scale = np.asarray(data["scale"], dtype=np.float64)
        return cls(
            mean=np.asarray(data["mean"], dtype=np.float64),
            scale=np.where(scale > 0, scale, 1.0),  # never a division by zero
            weights=np.asarray(data["weights"], dtype=np.float64),
            bias=float(data["bias"]),
            threshold=float(data["threshold"]),
            embedding_model=str(data["embedding_model"]),
            dimensions=dimensions,
        )


@cache
def shipped_fact_model() -> FactModel:
    """The model trained by `python -m bench.facts train`, read once."""
    return FactModel.from_json(json.loads(MODEL_PATH.read_text(encoding="utf-8")))
