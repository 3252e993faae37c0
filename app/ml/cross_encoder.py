"""Cross-encoder re-ranking model (sentence-transformers CrossEncoder), run off the event loop."""

from __future__ import annotations

from typing import Any

import anyio
import structlog

from app.ml.offline import offline_if_local

log = structlog.get_logger(__name__)


class CrossEncoderScorer:
    def __init__(self, model_name_or_path: str, device: str = "cpu", threads: int = 1) -> None:
        self.model_name = model_name_or_path
        self._device = device
        self._limiter = anyio.CapacityLimiter(threads)
        self._model: Any = None

    def load(self) -> None:
        if self._model is not None:
            return
        offline_if_local(self.model_name)
        from sentence_transformers import CrossEncoder

        self._model = CrossEncoder(self.model_name, device=self._device)
        log.info("cross_encoder.loaded", model=self.model_name)

    def score_sync(self, query: str, passages: list[str]) -> list[float]:
        self.load()
        scores = self._model.predict([(query, p) for p in passages], show_progress_bar=False)
        return [float(s) for s in scores]

    async def score(self, query: str, passages: list[str]) -> list[float]:
        if not passages:
            return []
        return await anyio.to_thread.run_sync(
            self.score_sync, query, passages, limiter=self._limiter
        )
