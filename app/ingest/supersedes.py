"""Updates without an LLM: does a user's new sentence supersede one of their current memories?

The explicit-correction rules (app/ingest/corrections.py) catch "actually, …", "forget that …"
and "I moved to …"; everyday updates rarely say so ("we packed up and went to Lisbon in March",
"the dentist pushed my appointment to the 10th"). Here a small learned model scores each pair of
(current memory shown to the extractor, sentence of the new user message) and the best pair at
or above the threshold becomes an UPDATE of that memory.

The model is a logistic regression over a few features of the pair (`pair_features`), trained by
`python -m bench.supersedes train` on pairs written for this project
(bench/data/supersedes/) and shipped as app/ingest/supersedes_model.json. Its features:

- how close the two are: the 768D cosine, the margin over the next closest memory shown, whether
  it is the closest; a new fact about the same thing as a memory sits near it;
- how much they share in words: the share of the memory's content words the sentence repeats
  (an update keeps the subject and predicate and changes the value), and whether the sentence
  names a new value (a name or a number the memory lacks) or the old one;
- what the sentence says about change and time, as counts of general English cue words whose
  weights are learned, not rules: change verbs ("switched", "sold", "rescheduled"), "now"-words
  ("these days", "anymore", "since"), endings ("passed away", "paid off"), additions ("also",
  "another", "as well"), one-off episodes ("yesterday", "a trip"), a question, and a person the
  memory does not mention ("my sister …" under "I work at …").

Precision comes first (a wrong UPDATE hides a true fact; a missed one leaves the old fact beside
the new one), so the threshold is the lowest at which cross-validated precision on the training
split stays >= 0.95 (docs/benchmarks/supersedes.md). The cue words are English and the
default embedder (all-mpnet-base-v2) is an English model, so a Japanese message is judged by a
model of its own (`language` "ja"): the same logistic regression and change direction, trained
on Japanese pairs over the multilingual vectors, with Japanese cues (app/ingest/supersedes_ja.py).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any
from uuid import UUID

import numpy as np

from app.ingest import supersedes_ja
from app.ingest.corrections import normalise
from app.ingest.domain import Candidate, Operation
from app.memories.sentences import split_sentences
from app.ml.language import detect_language

MODEL_PATH = Path(__file__).with_name("supersedes_model.json")
# One model per language it reads: its file; a message in another language is not judged.
MODEL_PATHS = {"en": MODEL_PATH, "ja": Path(__file__).with_name("supersedes_model_ja.json")}
# Japanese text: kana or kanji (a sentence of it ends at 。, not at ". " before a capital).
_JAPANESE = re.compile(r"[\u3041-\u30ff\u3400-\u4dbf\u4e00-\u9fff]")

FEATURES = (
    *supersedes_ja.SHARED_FEATURES,
    "change_verb",
    "now_word",
    "ending",
    "additive",
    "episode",
    "question",
    "other_person",
    "past_tense",
    "change_direction",
    "cosine_x_change",
    "cosine_x_additive",
)


def _cue(*phrases: str) -> re.Pattern[str]:
    return re.compile(r"\b(?:" + "|".join(phrases) + r")\b", re.IGNORECASE)


# General English cue words (not taken from the training pairs): their weights are learned.
_CHANGE_VERB = _cue(
    r"mov(?:e|ed|ing)",
    r"relocat\w*",
    r"switch\w*",
    r"chang\w*",
    r"replac\w*",
    r"swap\w*",
    r"trad(?:e|ed|ing) in",
    r"upgrad\w*",
    r"transferr\w*",
    r"resched\w*",
    r"postpon\w*",
    r"push(?:ed)? (?:back|to)",
    r"cancel+ed",
    r"quit",
    r"left",
    r"retir\w*",
    r"sold",
    r"gave up",
    r"given up",
    r"stopped",
    r"dropped",
    r"became",
    r"joined",
    r"start(?:ed|s)",
    r"took up",
    r"went (?:up|down|back)",
    r"raised",
    r"cut down",
    r"turned",
    r"migrated",
    r"convert\w*",
    r"downgrad\w*",
    r"rebook\w*",
    r"refinanc\w*",
    r"promot\w*",
    r"hired",
    r"fired",
    r"laid off",
    r"closed",
    r"opened",
    r"bought",
    r"got rid of",
    r"new",
    r"decided",
    r"marri\w*",
    r"divorc\w*",
    r"separated",
    r"engaged",
    r"increas\w*",
    r"decreas\w*",
    r"reduc\w*",
    r"lost",
    r"tapered",
    r"recovered",
)
_NOW_WORD = _cue(
    r"now",
    r"nowadays",
    r"these days",
    r"anymore",
    r"any more",
    r"no longer",
    r"any longer",
    r"no more",
    r"instead",
    r"since",
    r"from now on",
    r"as of",
    r"currently",
    r"at last",
    r"finally",
)
_ENDING = _cue(
    r"passed away",
    r"died",
    r"gone",
    r"over",
    r"paid off",
    r"healed",
    r"finished",
    r"ended",
    r"broke up",
    r"split up",
    r"graduated",
    r"former",
    r"ex",
    r"used to",
    r"retired",
    r"out of",
)
_ADDITIVE = _cue(
    r"also",
    r"too",
    r"as well",
    r"another",
    r"second",
    r"both",
    r"in addition",
    r"besides",
    r"extra",
    r"on the side",
    r"each",
)
_EPISODE = _cue(
    r"today",
    r"tonight",
    r"yesterday",
    r"this (?:morning|afternoon|evening)",
    r"last night",
    r"weekend",
    r"visit\w*",
    r"trip",
    r"holiday",
    r"vacation",
    r"conference",
    r"all day",
)
_QUESTION_START = re.compile(
    r"^(?:who|what|when|where|which|why|how|is|are|do|does|did|can|could|should|would|will)\b",
    re.IGNORECASE,
)
_PERSON = re.compile(
    r"\b(?:my|our|his|her) (?P<who>sister|brother|mother|mom|mum|father|dad|parents|wife|"
    r"husband|partner|son|daughter|kids|children|friend|colleague|coworker|neighbou?r|cousin|"
    r"uncle|aunt|niece|nephew|grand\w+|boss|roommate|boyfriend|girlfriend|fianc\w*)\b",
    re.IGNORECASE,
)
_STOPWORD_LIST = (
    "a an the i me my we our us you your he she his her it its they them their to in at on of "
    "for with and or but not no do does did have has had am is are was were be been being that "
    "this these those so as by from up out into about just very really all some any one get got "
    "s t m ve ll d re"
)
_STOPWORDS = frozenset(_STOPWORD_LIST.split())
_WORD = re.compile(r"[a-z0-9]+")
# Past and perfect verb forms: a change is told as an event ("we sold", "I've switched"), a
# memory of a state in the present ("I have", "I drive").
_PAST = re.compile(
    r"\b(?:\w{3,}ed|went|got|gave|took|made|left|sold|bought|became|began|broke|came|found|"
    r"had|lost|quit|ran|told|won|drove|flew|grew|paid|put|sent|spent|met|brought|fell|"
    r"has been|have been|was|were)\b",
    re.IGNORECASE,
)
_VALUE = re.compile(r"(?<![.!?] )(?<!^)\b[A-Z][\w'-]+|\b\d[\d.,:]*")


def _content_words(text: str) -> set[str]:
    """Lower-case content words, cut to a 5-letter stem ("moved"/"moving", "cats"/"cat")."""
    return {w[:5] for w in _WORD.findall(text.lower()) if w not in _STOPWORDS}


def _values(text: str) -> set[str]:
    """Names and numbers: capitalised words after the first word of a sentence, and digits."""
    return {v.lower().strip(".,:") for v in _VALUE.findall(text)}


def _is_question(sentence: str) -> bool:
    return sentence.rstrip().endswith("?") or _QUESTION_START.match(sentence) is not None


def pair_features(
    memory: str, sentence: str, cosine: float, next_cosine: float | None, shift: float
) -> list[float]:
    """The features of one (memory, sentence) pair, in the order of FEATURES. `next_cosine`: the
    highest cosine of the sentence to any other memory shown (None when it is the only one);
    `shift`: how far the sentence's embedding lies from the memory's along the model's change
    direction (sentence . direction - memory . direction)."""
    memory_n, sentence_n = normalise(memory), normalise(sentence)
    memory_words, sentence_words = _content_words(memory_n), _content_words(sentence_n)
    shared = memory_words & sentence_words
    memory_values, sentence_values = _values(memory_n), _values(sentence_n)
    change = len(_CHANGE_VERB.findall(sentence_n))
    additive = len(_ADDITIVE.findall(sentence_n))
    memory_people = {m["who"].lower() for m in _PERSON.finditer(memory_n)}
    other_person = any(m["who"].lower() not in memory_people for m in _PERSON.finditer(sentence_n))
    margin = cosine - next_cosine if next_cosine is not None else cosine
    return [
        cosine,
        margin,
        float(next_cosine is None or cosine >= next_cosine),
        len(shared) / len(memory_words) if memory_words else 0.0,
        float(np.log1p(len(sentence_words - memory_words))),
        float(bool(sentence_values - memory_values)),
        float(bool(sentence_values & memory_values)),
        float(change),
        float(len(_NOW_WORD.findall(sentence_n))),
        float(len(_ENDING.findall(sentence_n))),
        float(additive),
        float(len(_EPISODE.findall(sentence_n))),
        float(_is_question(sentence_n)),
        float(other_person),
        float(len(_PAST.findall(sentence_n))),
        shift,
        cosine * min(change, 2),
        cosine * min(additive, 2),
    ]


# A pair's features, or None for a pair the language's model does not judge.
Featurize = Callable[[str, str, float, float | None, float], list[float] | None]
# Per language the model reads: its features' names and the function that computes them.
FEATURE_SETS: dict[str, tuple[tuple[str, ...], Featurize]] = {
    "en": (FEATURES, pair_features),
    "ja": (supersedes_ja.FEATURES, supersedes_ja.pair_features),
}


@dataclass(frozen=True, slots=True)
class SupersedesModel:
    """Standardised features, one weight each, a bias; `threshold` is the shipped default.
    `direction`: a unit vector of the embedder `embedding_model` (768D English, 512D
    multilingual), from the mean difference (sentence - memory) of superseding pairs to that of
    pairs that only add. `language`: the messages it judges, which picks its features."""

    features: tuple[str, ...]
    mean: np.ndarray
    scale: np.ndarray
    weights: np.ndarray
    bias: float
    threshold: float
    direction: np.ndarray
    embedding_model: str
    language: str = "en"

    @property
    def featurize(self) -> Featurize:
        return FEATURE_SETS[self.language][1]

    def cues(self, sentence: str) -> list[str]:
        """The cue words the sentence matched, for the reason (Japanese: no word boundaries
        to show them by in the features' names)."""
        return supersedes_ja.matched_cues(sentence) if self.language == "ja" else []

    def scores(self, features: np.ndarray) -> np.ndarray:
        """The probability that each row's memory is superseded by its sentence."""
        z = ((features - self.mean) / self.scale) @ self.weights + self.bias
        return 1.0 / (1.0 + np.exp(-z))

    def top_features(self, row: list[float], count: int = 3) -> list[tuple[str, float]]:
        """The features that pushed this pair's score up most, with their values."""
        contributions = (np.asarray(row) - self.mean) / self.scale * self.weights
        order = np.argsort(-contributions)[:count]
        return [(self.features[i], row[i]) for i in order if contributions[i] > 0]

    def to_json(self) -> dict[str, object]:
        return {
            "features": list(self.features),
            "mean": [round(float(v), 6) for v in self.mean],
            "scale": [round(float(v), 6) for v in self.scale],
            "weights": [round(float(v), 6) for v in self.weights],
            "bias": round(self.bias, 6),
            "threshold": round(self.threshold, 4),
            "embedding_model": self.embedding_model,
            "language": self.language,
            "direction": [round(float(v), 6) for v in self.direction],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SupersedesModel:
        language = str(data.get("language", "en"))
        features = tuple(data["features"])
        if language not in FEATURE_SETS or features != FEATURE_SETS[language][0]:
            raise ValueError("supersedes model was trained on other features: retrain it")
        return cls(
            features=features,
            mean=np.asarray(data["mean"], dtype=np.float64),
            scale=np.asarray(data["scale"], dtype=np.float64),
            weights=np.asarray(data["weights"], dtype=np.float64),
            bias=float(data["bias"]),
            threshold=float(data["threshold"]),
            direction=np.asarray(data["direction"], dtype=np.float32),
            embedding_model=str(data["embedding_model"]),
            language=language,
        )


@cache
def shipped_model(language: str = "en") -> SupersedesModel:
    """The model of one language trained by `python -m bench.supersedes train`, read once."""
    path = MODEL_PATHS[language]
    return SupersedesModel.from_json(json.loads(path.read_text(encoding="utf-8")))


def model_for(content: str) -> SupersedesModel:
    """The model that judges a message: the Japanese one for a Japanese message (kana, or what
    the language detector reads as Japanese), else the English one, as before there was a
    second."""
    return shipped_model("ja" if detect_language(content) == "ja" else "en")


@dataclass(frozen=True, slots=True)
class Supersession:
    """The memory a sentence of the message supersedes, and the message's other sentences."""

    target: Candidate
    sentence: str
    rest: str | None
    score: float
    threshold: float
    evidence: list[tuple[str, float]]
    cues: tuple[str, ...] = ()

    @property
    def reason(self) -> str:
        matched = ", ".join(f"{name} {value:.2f}" for name, value in self.evidence)
        cues = f"; cues {', '.join(self.cues)}" if self.cues else ""
        return f"supersedes without an LLM: score {self.score:.3f} >= {self.threshold:.3f}" + (
            f" ({matched}{cues})" if matched or cues else ""
        )


def message_sentences(content: str) -> list[str]:
    """The sentences a message is judged by, as the store splits a memory into sentences;
    Japanese also at 。 and full-width ! ? (supersedes_ja.split_sentences), which English
    never contains."""
    return [
        piece
        for sentence in split_sentences(content)
        for piece in (
            supersedes_ja.split_sentences(sentence) if _JAPANESE.search(sentence) else [sentence]
        )
    ]


def _joined(sentences: Sequence[str]) -> str | None:
    """The message's other sentences as one text (Japanese ones without spaces)."""
    if not sentences:
        return None
    return ("" if all(_JAPANESE.search(s) for s in sentences) else " ").join(sentences)


@dataclass(frozen=True, slots=True)
class SentenceView:
    """One sentence of the message as the model sees it: its 768D cosine to each memory shown
    and its embedding's projection on the model's direction."""

    text: str
    cosines: Mapping[UUID, float]
    projection: float


def judgeable(candidates: Sequence[Candidate], speaker: str | None) -> list[Candidate]:
    """The memories a model may supersede: of one sentence, said by the message's speaker."""
    return [
        c for c in candidates if c.speaker == speaker and len(message_sentences(c.content)) == 1
    ]


def candidate_pairs(
    sentences: Sequence[SentenceView],
    candidates: Sequence[Candidate],
    memory_projections: Mapping[UUID, float],
    speaker: str | None = None,
    featurize: Featurize = pair_features,
) -> tuple[list[list[float]], list[tuple[int, Candidate]]]:
    """Each (sentence index, memory) pair the model judges, with its features (`featurize`:
    the model's language's). Only a memory of one sentence, said by the message's speaker, can
    be superseded (an UPDATE would drop a memory's other facts, and "I" in another speaker's
    memory is someone else)."""
    eligible = judgeable(candidates, speaker)
    rows: list[list[float]] = []
    pairs: list[tuple[int, Candidate]] = []
    for index, sentence in enumerate(sentences):
        for candidate in eligible:
            cosine = sentence.cosines.get(candidate.memory_id)
            projection = memory_projections.get(candidate.memory_id)
            if cosine is None or projection is None:
                continue
            others = [v for k, v in sentence.cosines.items() if k != candidate.memory_id]
            shift = sentence.projection - projection
            row = featurize(
                candidate.content, sentence.text, cosine, max(others, default=None), shift
            )
            if row is not None:
                rows.append(row)
                pairs.append((index, candidate))
    return rows, pairs


def find_superseded(
    sentences: Sequence[SentenceView],
    candidates: Sequence[Candidate],
    memory_projections: Mapping[UUID, float],
    threshold: float,
    model: SupersedesModel,
    speaker: str | None = None,
) -> Supersession | None:
    """The best (sentence, memory) pair at or above `threshold`, else None.
    `memory_projections`: each memory's 768D embedding projected on the model's direction."""
    rows, pairs = candidate_pairs(
        sentences, candidates, memory_projections, speaker, model.featurize
    )
    if not rows:
        return None
    scores = model.scores(np.asarray(rows, dtype=np.float64))
    best = int(np.argmax(scores))
    if scores[best] < threshold:
        return None
    index, target = pairs[best]
    return Supersession(
        target=target,
        sentence=sentences[index].text,
        rest=_joined([s.text for i, s in enumerate(sentences) if i != index]),
        score=float(scores[best]),
        threshold=threshold,
        evidence=model.top_features(rows[best]),
        cues=tuple(model.cues(sentences[index].text)),
    )


def memory_scores(
    sentences: Sequence[SentenceView],
    candidates: Sequence[Candidate],
    memory_projections: Mapping[UUID, float],
    model: SupersedesModel,
    speaker: str | None = None,
) -> dict[UUID, float]:
    """Each memory the model can judge, with its best score over the message's sentences (the
    probability that the message supersedes it)."""
    rows, pairs = candidate_pairs(
        sentences, candidates, memory_projections, speaker, model.featurize
    )
    best: dict[UUID, float] = {}
    if rows:
        for (_, candidate), score in zip(
            pairs, model.scores(np.asarray(rows, dtype=np.float64)), strict=True
        ):
            best[candidate.memory_id] = max(best.get(candidate.memory_id, 0.0), float(score))
    # A memory judged but every pair ruled out (another person's fact, Japanese): the message
    # does not replace it, so it scores 0.
    for candidate in judgeable(candidates, speaker):
        judged = candidate.memory_id in memory_projections and any(
            candidate.memory_id in s.cosines for s in sentences
        )
        if judged and candidate.memory_id not in best:
            best[candidate.memory_id] = 0.0
    return best


def vet_llm_updates(
    operations: Sequence[Operation], scores: Mapping[UUID, float], floor: float
) -> int:
    """Precision first for the LLM's UPDATEs: one of a memory the learned model judges and
    scores below `floor` (the message almost surely does not replace it: a remark on the same
    topic, a second fact of its kind) becomes an ADD beside it, the memory kept current. An
    UPDATE of a memory the model cannot judge (several sentences, another speaker) stands.
    Returns how many were turned into ADDs."""
    vetoed = 0
    for op in operations:
        if op.op != "UPDATE" or op.target is None or op.content is None:
            continue
        score = scores.get(op.target.memory_id)
        if score is None or score >= floor:
            continue
        said = f"; the LLM said: {op.reason}" if op.reason else ""
        op.reason = (
            f"the LLM's UPDATE of {op.target.ref} made an ADD beside it: supersedes score "
            f"{score:.3f} < {floor:.3f}{said}"
        )[:1000]
        op.category = op.category or op.target.category
        op.op, op.target = "ADD", None
        vetoed += 1
    return vetoed
