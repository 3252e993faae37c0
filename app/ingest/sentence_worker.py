"""The sentence worker: gives new memories their sentence vectors while the model is idle, beside
the ingestion workers (COGNIS_SENTENCE_VECTORS; app/memories/sentence_backfill.py says how a
batch is found, embedded and stored)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import structlog
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.memories.sentence_backfill import BackfillReport, embed_missing_sentences
from app.ml.embedder import Embedder
from app.wakeup import sleep_until_woken

log = structlog.get_logger(__name__)

# The worker's rhythm: how long the model must have been idle, how many memories it takes at
# a time (a call of about 20 sentences: a fraction of a second on a small CPU), and how long
# it waits when there is nothing to do.
IDLE_S = 2.0
WORKER_BATCH = 8
POLL_S = 2.0


class SentenceWorker:
    """Embeds the sentences of new memories while the model is idle."""

    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        embedder: Embedder,
        watched: Sequence[Embedder] = (),
        idle_s: float = IDLE_S,
        batch_size: int = WORKER_BATCH,
    ) -> None:
        self._sessionmaker = sessionmaker
        self._embedder = embedder
        # Every model of this process whose work comes first (the query embedder's too: on a
        # small machine the two share the cores).
        self._watched = (embedder, *watched)
        self._idle_s = idle_s
        self._batch_size = batch_size
        self._wake = asyncio.Event()  # nothing wakes it early: it polls for an idle model

    def model_idle(self) -> bool:
        return min(e.idle_s() for e in self._watched) >= self._idle_s

    async def run_once(self) -> BackfillReport:
        """One small batch, if the model has been idle long enough (else nothing)."""
        if not self.model_idle():
            return BackfillReport()
        return await embed_missing_sentences(
            self._sessionmaker,
            self._embedder,
            batch_size=self._batch_size,
            max_batches=1,
            background=True,
        )

    async def run_forever(self, stop: asyncio.Event) -> None:
        log.info("sentences.worker_started", idle_s=self._idle_s)
        while not stop.is_set():
            try:
                done = await self.run_once()
            except Exception as exc:  # a store outage: try again after the pause
                log.warning("sentences.worker_failed", error=str(exc))
                done = BackfillReport()
            if done.memories:
                continue
            await sleep_until_woken(self._wake, stop, POLL_S)
        log.info("sentences.worker_stopped")
