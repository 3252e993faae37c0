"""The entity worker: finds the entities of new memories while the model is idle, beside the
ingestion workers (COGNIS_ENTITIES; app/memories/entities.py says how a batch is found,
recognised and stored)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import structlog
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.memories.entities import ExtractionReport, extract_missing_entities
from app.ml.embedder import Embedder
from app.ml.ner import EntityRecognizer
from app.wakeup import sleep_until_woken

log = structlog.get_logger(__name__)

IDLE_S = 1.0
WORKER_BATCH = 32
POLL_S = 2.0


class EntityWorker:
    """Finds the entities of new memories while the model is idle (module docstring)."""

    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        recognizer: EntityRecognizer,
        watched: Sequence[Embedder] = (),
        idle_s: float = IDLE_S,
        batch_size: int = WORKER_BATCH,
    ) -> None:
        self._sessionmaker = sessionmaker
        self._recognizer = recognizer
        self._watched = tuple(watched)
        self._idle_s = idle_s
        self._batch_size = batch_size
        self._wake = asyncio.Event()

    def model_idle(self) -> bool:
        return all(e.idle_s() >= self._idle_s for e in self._watched)

    async def run_once(self) -> ExtractionReport:
        if not self.model_idle():
            return ExtractionReport()
        return await extract_missing_entities(
            self._sessionmaker, self._recognizer, batch_size=self._batch_size, max_batches=1
        )

    async def run_forever(self, stop: asyncio.Event) -> None:
        log.info("entities.worker_started", idle_s=self._idle_s)
        while not stop.is_set():
            try:
                done = await self.run_once()
            except Exception as exc:  # a store outage: try again after the pause
                log.warning("entities.worker_failed", error=str(exc))
                done = ExtractionReport()
            if done.memories:
                continue
            await sleep_until_woken(self._wake, stop, POLL_S)
        log.info("entities.worker_stopped")
