"""Stage 2: Matryoshka two-stage vector search — a 256D HNSW shortlist, re-scored exactly at
768D (against the content's vector, or the better of it and the contextual text's)."""

from __future__ import annotations

from dataclasses import dataclass

from app.memories.repository import MemoryRepository
from app.ml.embedder import Embedding
from app.retrieval.candidates import Candidate, rank_by_score
from app.retrieval.timing import StageTimer


@dataclass(frozen=True, slots=True)
class VectorLegSettings:
    shortlist: int  # candidates_256d
    keep: int  # candidates_768d
    ef_search: int
    rescore_768d: bool
    with_context: bool


async def vector_leg(
    repository: MemoryRepository,
    user_id: str,
    session_id: str | None,
    embedding: Embedding,
    options: VectorLegSettings,
    timer: StageTimer,
) -> tuple[list[Candidate], int]:
    """The best candidates, and how many the 256D stage shortlisted."""
    with timer.stage("vector_256d_ms"):
        coarse = await repository.coarse_candidates(
            user_id, embedding.coarse, session_id, options.shortlist, options.ef_search
        )
    candidates = []
    for rank, (memory_id, score) in enumerate(coarse, start=1):
        candidate = Candidate(memory_id=memory_id, score=score)
        candidate.record("256d", rank, score)
        candidates.append(candidate)
    if not options.rescore_768d:
        return candidates[: options.keep], len(coarse)
    with timer.stage("vector_768d_ms"):
        ids = [c.memory_id for c in candidates]
        exact = await (
            repository.exact_768d_scores_with_context(user_id, ids, embedding.full)
            if options.with_context
            else repository.exact_768d_scores(user_id, ids, embedding.full)
        )
        for candidate in candidates:
            candidate.score = exact.get(candidate.memory_id, -1.0)
        ranked = rank_by_score(candidates, "768d")[: options.keep]
    return ranked, len(coarse)
