"""Stage 2: Matryoshka two-stage vector search — a 256D HNSW shortlist, re-scored exactly at
768D (against the content's vector, or the best of it and, by lever, the contextual text's and
the nearest sentence's: app/memories/sentences.py).

With the sentence lever, the same pass also gives each candidate its relevance (the better of
content and context, app/retrieval/relevance.py), which the nearest sentence does not change.

Lever `feedback` (pseudo-relevance feedback, Rocchio): after the 768D pass, the query vector
moves towards the mean content vector of the best `feedback_top` hits,

    q' = q + beta x mean(d_1 .. d_m)        (alpha = 1, beta = 0.75, m = 3: Rocchio's
                                              textbook weights, not tuned here)

and the same shortlist is scored again with q'. A question naming a topic ("What books has
Tim read?") then also finds the turns that share the topic of its best hits but not its words.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import numpy as np

from app.ml.embedder import Embedding
from app.retrieval.candidates import Candidate, rank_by_score
from app.retrieval.relevance import on_scale
from app.retrieval.timing import StageTimer
from app.retrieval.vector_sql import SearchRepository


@dataclass(frozen=True, slots=True)
class VectorLegSettings:
    shortlist: int  # candidates_256d
    keep: int  # candidates_768d
    ef_search: int
    exact_max: int  # a user with at most this many current memories is scanned exactly
    rescore_768d: bool
    with_context: bool
    with_sentences: bool = False
    feedback_top: int = 0  # m: 0 switches the lever off
    feedback_weight: float = 0.75  # beta

    @property
    def scores_relevance(self) -> bool:
        """Whether the exact 768D score is relevance's own cosine (content or context,
        whichever is closer): context on and rescored, and no sentence's cosine in it."""
        return self.with_context and self.rescore_768d and not self.with_sentences


async def vector_leg(
    repository: SearchRepository,
    user_id: str,
    session_id: str | None,
    embedding: Embedding,
    options: VectorLegSettings,
    timer: StageTimer,
    exact_scan: bool | None = None,
) -> tuple[list[Candidate], int]:
    """The best candidates, and how many the 256D stage shortlisted. `exact_scan`: the
    `scan_choice` made while the query was embedded (None: made here)."""
    with timer.stage("vector_256d_ms"):
        coarse = await repository.coarse_candidates(
            user_id,
            embedding.coarse,
            session_id,
            options.shortlist,
            options.ef_search,
            options.exact_max,
            exact_scan,
        )
    candidates = []
    for rank, (memory_id, score) in enumerate(coarse, start=1):
        candidate = Candidate(memory_id=memory_id, score=score)
        candidate.record("256d", rank, score)
        candidates.append(candidate)
    if not options.rescore_768d:
        return candidates[: options.keep], len(coarse)
    ids = [c.memory_id for c in candidates]
    exact_scores = (
        repository.exact_768d_scores_with_context
        if options.with_context
        else repository.exact_768d_scores
    )
    with timer.stage("vector_768d_ms"):
        if options.with_sentences:
            cosines = await repository.exact_768d_cosines(user_id, ids, embedding.full)
            exact = {i: c.best(options.with_context, sentence=True) for i, c in cosines.items()}
            for candidate in candidates:
                if (found := cosines.get(candidate.memory_id)) is not None:
                    candidate.relevance = on_scale(found.best(context=True, sentence=False))
                    candidate.sentences_pending = found.sentences_pending
        else:
            exact = await exact_scores(user_id, ids, embedding.full)
        ranked = rescored(candidates, exact, "768d")
    if options.feedback_top > 0 and ranked:
        with timer.stage("feedback_ms"):
            best = [c.memory_id for c in ranked[: options.feedback_top]]
            vectors = await repository.content_vectors(user_id, best)
            moved = rocchio(embedding.full, vectors, options.feedback_weight)
            exact = await exact_scores(user_id, ids, moved)
            ranked = rescored(candidates, exact, "feedback")
    return ranked[: options.keep], len(coarse)


async def scan_choice(
    repository: SearchRepository, user_id: str, options: VectorLegSettings, timer: StageTimer
) -> bool:
    """Stage 2a's choice between an exact scan and the index (a count of the user's matching
    memories, stopped past `exact_max`): a round trip that needs no query vector."""
    with timer.stage("scan_choice_ms"):
        return await repository.scan_choice(
            user_id, options.ef_search, options.exact_max, options.shortlist
        )


def rescored(
    candidates: list[Candidate], exact: dict[uuid.UUID, float], stage: str
) -> list[Candidate]:
    """The candidates scored by `exact` (-1 where it has none) and ranked at `stage`."""
    for candidate in candidates:
        candidate.score = exact.get(candidate.memory_id, -1.0)
    return rank_by_score(candidates, stage)


def rocchio(query: np.ndarray, relevant: list[np.ndarray], weight: float) -> np.ndarray:
    """q + weight x mean(relevant), unit length (cosine ignores length; kept tidy)."""
    if not relevant:
        return query
    moved = np.asarray(query, dtype=np.float32) + weight * np.mean(relevant, axis=0)
    norm = float(np.linalg.norm(moved))
    return moved / norm if norm > 0 else moved
