"""The sentence worker: gives new memories their sentence vectors while the model is idle, beside
the ingestion workers (COGNIS_SENTENCE_VECTORS; app/memories/sentence_backfill.py says how a
batch is found, embedded and stored; app/ingest/idle_worker.py, its loop)."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.ingest.idle_worker import IdleWorker
from app.memories.sentence_backfill import BackfillReport, embed_missing_sentences
from app.ml.embedder import Embedder

# The worker's rhythm: how long the model must have been idle, and how many memories it takes
# at a time (a call of about 20 sentences: a fraction of a second on a small CPU).
IDLE_S = 2.0
WORKER_BATCH = 8


class SentenceWorker(IdleWorker[BackfillReport]):
    """Embeds the sentences of new memories while the model is idle."""

    events = "sentences"

    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        embedder: Embedder,
        watched: Sequence[Embedder] = (),
        idle_s: float = IDLE_S,
        batch_size: int = WORKER_BATCH,
    ) -> None:
        # Every model of this process whose work comes first (the query embedder's too: on a
        # small machine the two share the cores).
        super().__init__((embedder, *watched), idle_s)
        self._sessionmaker = sessionmaker
        self._embedder = embedder
        self._batch_size = batch_size

    def idle_report(self) -> BackfillReport:
        return BackfillReport()

    async def work(self) -> BackfillReport:
        return await embed_missing_sentences(
            self._sessionmaker,
            self._embedder,
            batch_size=self._batch_size,
            max_batches=1,
            background=True,
        )
