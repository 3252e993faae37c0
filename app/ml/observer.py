"""The embedding micro-batcher's reports (the QueueObserver of app/ml/scheduling/dispatcher.py)
as Prometheus series (app/metrics.py)."""

from __future__ import annotations

from app.metrics import (
    EMBEDDED_TEXTS,
    EMBEDDING_BATCH_SECONDS,
    EMBEDDING_BATCHES,
    EMBEDDING_DEADLINE_SHED,
    EMBEDDING_QUEUE_TEXTS,
    EMBEDDING_QUEUE_WAIT_SECONDS,
)
from app.ml.scheduling.work import WorkClass


class EmbeddingObserver:
    """What an embedder's micro-batcher reports, as the series above (app.ml.scheduling.dispatcher's
    QueueObserver)."""

    def __init__(self, embedder: str) -> None:
        self._embedder = embedder
        for work_class in WorkClass:  # every series from the start, for rate() and alerts
            labels = {"embedder": embedder, "class": work_class.label}
            EMBEDDING_QUEUE_TEXTS.labels(**labels)
            EMBEDDING_QUEUE_WAIT_SECONDS.labels(**labels)
            EMBEDDING_DEADLINE_SHED.labels(**labels)

    def batch(self, texts: int, seconds: float) -> None:
        EMBEDDED_TEXTS.labels(embedder=self._embedder).inc(texts)
        EMBEDDING_BATCHES.labels(embedder=self._embedder).inc()
        EMBEDDING_BATCH_SECONDS.labels(embedder=self._embedder).observe(seconds)

    def waited(self, work_class: WorkClass, seconds: float) -> None:
        EMBEDDING_QUEUE_WAIT_SECONDS.labels(self._embedder, work_class.label).observe(seconds)

    def depth(self, work_class: WorkClass, texts: int) -> None:
        EMBEDDING_QUEUE_TEXTS.labels(self._embedder, work_class.label).set(texts)

    def shed(self, work_class: WorkClass) -> None:
        EMBEDDING_DEADLINE_SHED.labels(self._embedder, work_class.label).inc()
