"""Updates without an LLM: does a user's new sentence supersede one of their current memories?

The explicit-correction rules (app/ingest/corrections.py) catch "actually, …", "forget that …"
and "I moved to …"; everyday updates rarely say so ("we packed up and went to Lisbon in March",
"the dentist pushed my appointment to the 10th"). Here a small learned model scores each pair of
(current memory shown to the extractor, sentence of the new user message) and the best pair at
or above the threshold becomes an UPDATE of that memory.

The model is a logistic regression over a few features of the pair, trained by
`python -m bench.supersedes train` on pairs written for this project (bench/data/supersedes/):
its features are in app/ingest/supersedes_en.py (English) and supersedes_ja.py (Japanese), its
weights and their files in app/ingest/supersedes_weights.py; this module decides with them.

Precision comes first (a wrong UPDATE hides a true fact; a missed one leaves the old fact beside
the new one), so the threshold is the lowest at which cross-validated precision on the training
split stays >= 0.95 (docs/benchmarks/supersedes.md). The cue words are English and the
default embedder (all-mpnet-base-v2) is an English model, so a Japanese message is judged by a
model of its own (`language` "ja"): the same logistic regression and change direction, trained
on Japanese pairs over the multilingual vectors, with Japanese cues (app/ingest/supersedes_ja.py).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from uuid import UUID

import numpy as np

from app.ingest import supersedes_ja
from app.ingest.domain import Candidate, Operation
from app.ingest.facts import fact_units
from app.ingest.supersedes_en import pair_features
from app.ingest.supersedes_weights import (
    FEATURE_SETS,
    MODEL_PATHS,
    Featurize,
    SupersedesModel,
    model_for,
    shipped_model,
)
from app.memories.sentences import split_sentences

__all__ = [
    "FEATURE_SETS",
    "MODEL_PATHS",
    "SentenceView",
    "SupersedesModel",
    "Supersession",
    "candidate_pairs",
    "find_superseded",
    "memory_scores",
    "message_sentences",
    "model_for",
    "shipped_model",
    "vet_llm_updates",
]

# Japanese text: kana or kanji (a sentence of it ends at 。, not at ". " before a capital).
_JAPANESE = re.compile(r"[\u3041-\u30ff\u3400-\u4dbf\u4e00-\u9fff]")


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
    """The memories a model may supersede: of one fact (one sentence, or one unit as a message
    is cut into facts: a sentence with the short piece that leans on it), said by the
    message's speaker."""
    return [
        c
        for c in candidates
        if c.speaker == speaker
        and (len(message_sentences(c.content)) == 1 or len(fact_units(c.content)) == 1)
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
