"""The entity worker: finds the entities of new memories while the model is idle, beside the
ingestion workers (COGNIS_ENTITIES; app/memories/entities.py says how a batch is found,
recognised and stored; app/ingest/idle_worker.py, its loop)."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.ingest.idle_worker import IdleWorker
from app.memories.entities import ExtractionReport, extract_missing_entities
from app.ml.embedder import Embedder
from app.ml.ner import EntityRecognizer

IDLE_S = 1.0
WORKER_BATCH = 32


class EntityWorker(IdleWorker[ExtractionReport]):
    """Finds the entities of new memories while the model is idle (module docstring)."""

    events = "entities"

    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        recognizer: EntityRecognizer,
        watched: Sequence[Embedder] = (),
        idle_s: float = IDLE_S,
        batch_size: int = WORKER_BATCH,
    ) -> None:
        super().__init__(watched, idle_s)
        self._sessionmaker = sessionmaker
        self._recognizer = recognizer
        self._batch_size = batch_size

    def idle_report(self) -> ExtractionReport:
        return ExtractionReport()

    async def work(self) -> ExtractionReport:
        return await extract_missing_entities(
            self._sessionmaker, self._recognizer, batch_size=self._batch_size, max_batches=1
        )
