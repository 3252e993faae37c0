"""Step 3a: the user's most similar current memories, shown to the extractor as m1..mN."""

from __future__ import annotations

from app.config import Settings
from app.ingest.domain import Candidate, MessageContext
from app.ingest.repository import IngestRepository
from app.ml.embedder import Embedding

# The 256D stage looks further than the final list, as retrieval's two-stage search does.
COARSE_FACTOR = 4


async def similar_memories(
    repository: IngestRepository,
    context: MessageContext,
    embedding: Embedding,
    settings: Settings,
) -> list[Candidate]:
    rows = await repository.similar_current(
        context.user_id,
        embedding.full,
        embedding.coarse,
        context.session_id,
        limit=settings.ingest_candidates,
        coarse_limit=settings.ingest_candidates * COARSE_FACTOR,
    )
    return [
        Candidate(
            ref=f"m{i}",
            memory_id=memory.id,
            content=memory.content,
            category=memory.category,
            scope=memory.scope,
            session_id=memory.session_id,
            event_time=memory.event_time,
            similarity=similarity,
            embedding=memory.embedding_768d,
        )
        for i, (memory, similarity) in enumerate(rows, start=1)
    ]
