"""Step 3a: the user's most similar current memories, shown to the extractor as m1..mN.

The same two-stage search as retrieval's stage 2 (MemoryRepository.nearest_current)."""

from __future__ import annotations

import uuid

import numpy as np

from app.config import IngestSettings, RetrievalSettings
from app.db.models import Memory
from app.ingest.domain import Candidate, MessageContext
from app.memories.repository import MemoryRepository
from app.ml.embedder import Embedding

# The 256D stage looks further than the final list, as retrieval's two-stage search does.
COARSE_FACTOR = 4
# pgvector's default ef_search; the scan asks for at least as many as it will keep.
HNSW_MIN_EF_SEARCH = 40


async def similar_memories(
    repository: MemoryRepository,
    context: MessageContext,
    embedding: Embedding,
    ingest: IngestSettings,
    retrieval: RetrievalSettings,
) -> list[Candidate]:
    coarse_limit = ingest.ingest_candidates * COARSE_FACTOR
    scored = await repository.nearest_current(
        context.user_id,
        embedding,
        context.session_id,
        limit=ingest.ingest_candidates,
        coarse_limit=coarse_limit,
        ef_search=max(HNSW_MIN_EF_SEARCH, coarse_limit),
        exact_max=retrieval.exact_search_max_memories,
    )
    rows = await repository.get_many(context.user_id, [memory_id for memory_id, _ in scored])
    return [
        _candidate(f"m{i}", rows[memory_id], similarity)
        for i, (memory_id, similarity) in enumerate(scored, start=1)
    ]


async def multilingual_nearest(
    repository: MemoryRepository,
    context: MessageContext,
    vectors: list[np.ndarray],
    shown: list[Candidate],
    ingest: IngestSettings,
    retrieval: RetrievalSettings,
) -> list[Candidate]:
    """The memories shown, then each sentence's nearest current memories by multilingual
    cosine that are not among them (m<N+1>, ...; `similarity` their multilingual cosine). For a
    message the multilingual vectors judge (Japanese): the 768D search that found the others
    reads English, so among many Japanese memories it may miss the one a sentence changes."""
    limit = ingest.ingest_candidates
    exact = await repository.scan_choice(
        context.user_id,
        max(HNSW_MIN_EF_SEARCH, limit),
        retrieval.exact_search_max_memories,
        limit,
    )
    known = {c.memory_id for c in shown}
    found: list[tuple[uuid.UUID, float]] = []
    for vector in vectors:
        nearest = await repository.multilingual_candidates(
            context.user_id, vector, context.session_id, limit, exact, other_languages_only=False
        )
        for memory_id, similarity in nearest:
            if memory_id not in known:
                known.add(memory_id)
                found.append((memory_id, similarity))
    if not found:
        return shown
    rows = await repository.get_many(context.user_id, [memory_id for memory_id, _ in found])
    added = [(memory_id, s) for memory_id, s in found if memory_id in rows]
    return shown + [
        _candidate(f"m{i}", rows[memory_id], similarity)
        for i, (memory_id, similarity) in enumerate(added, start=len(shown) + 1)
    ]


def _candidate(ref: str, memory: Memory, similarity: float) -> Candidate:
    return Candidate(
        ref=ref,
        memory_id=memory.id,
        content=memory.content,
        category=memory.category,
        scope=memory.scope,
        session_id=memory.session_id,
        event_time=memory.event_time,
        similarity=similarity,
        speaker=memory.speaker,
        metadata=memory.metadata_,
    )
