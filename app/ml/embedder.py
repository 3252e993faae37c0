"""Matryoshka embeddings: one 768D vector per text and its re-normalised 256D prefix."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, get_args

import anyio
import numpy as np
import structlog

from app.config import EmbeddingBackend
from app.db.models import COARSE_DIM, EMBEDDING_DIM
from app.ml.offline import offline_if_local

if TYPE_CHECKING:
    from app.ml.http_encoder import HttpEndpoint

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class Embedding:
    """A unit 768D vector and its unit 256D prefix (e256 = e768[:256] / ||e768[:256]||)."""

    full: np.ndarray
    coarse: np.ndarray


def matryoshka(vectors: np.ndarray) -> list[Embedding]:
    """Normalise model output to unit 768D and derive the unit 256D prefix.

    A model with fewer dimensions (all-MiniLM-L6-v2: 384) is zero-padded to 768: padding with
    zeros leaves every cosine similarity unchanged, so one schema serves both models.
    """
    vectors = np.asarray(vectors, dtype=np.float32)
    if vectors.ndim != 2:
        raise ValueError("expected a 2-D array of embeddings")
    dim = vectors.shape[1]
    if dim > EMBEDDING_DIM:
        raise ValueError(f"model produces {dim} dimensions; at most {EMBEDDING_DIM} are supported")
    if dim < EMBEDDING_DIM:
        vectors = np.pad(vectors, ((0, 0), (0, EMBEDDING_DIM - dim)))
    full = vectors / np.clip(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12, None)
    prefix = full[:, :COARSE_DIM]
    coarse = prefix / np.clip(np.linalg.norm(prefix, axis=1, keepdims=True), 1e-12, None)
    return [Embedding(full=f, coarse=c) for f, c in zip(full, coarse, strict=True)]


class Embedder:
    """A sentence-transformers model run in a worker thread, one batch at a time."""

    def __init__(
        self,
        model_name_or_path: str,
        device: str = "cpu",
        batch_size: int = 32,
        threads: int = 1,
        query_cache_size: int = 0,
        backend: EmbeddingBackend = "torch",
        intra_op_threads: int | None = None,
        onnx_cache_dir: str | None = None,
        http_endpoint: HttpEndpoint | None = None,
    ) -> None:
        if backend not in get_args(EmbeddingBackend):
            raise ValueError(f"unknown embedding backend {backend!r}")
        self.model_name = model_name_or_path
        self.backend = backend
        self._intra_op_threads = intra_op_threads
        self._onnx_cache_dir = onnx_cache_dir
        self._http_endpoint = http_endpoint
        self._device = device
        self._batch_size = batch_size
        self._limiter = anyio.CapacityLimiter(threads)
        self._model: Any = None
        self._query_cache_size = query_cache_size
        self._query_cache: OrderedDict[str, Embedding] = OrderedDict()

    @property
    def loaded(self) -> bool:
        return self._model is not None

    def load(self) -> None:
        if self._model is not None:
            return
        offline_if_local(self.model_name)
        if self.backend == "torch":
            self._model = self._load_torch()
            dimensions = getattr(
                # Renamed get_embedding_dimension in sentence-transformers 6; older names kept.
                self._model,
                "get_embedding_dimension",
                self._model.get_sentence_embedding_dimension,
            )()
        elif self.backend == "http":
            from app.ml.http_encoder import HttpEncoder

            if self._http_endpoint is None:
                raise ValueError("the http embedding backend needs an endpoint")
            # Nothing is asked yet: an embedder that is down must not keep the API from starting.
            self._model = HttpEncoder(self._http_endpoint)
            dimensions = self._model.dimension
        else:
            from app.ml.onnx_encoder import OnnxSentenceEncoder

            self._model = OnnxSentenceEncoder(
                self.model_name,
                quantized=self.backend == "onnx-int8",
                cache_dir=self._onnx_cache_dir,
                threads=self._intra_op_threads,
                device=self._device,
            )
            dimensions = self._model.dimension
        log.info(
            "embedder.loaded",
            model=self.model_name,
            backend=self.backend,
            intra_op_threads=self._intra_op_threads,
            dimensions=dimensions,
        )

    def _load_torch(self) -> Any:
        import torch
        from sentence_transformers import SentenceTransformer

        if self._intra_op_threads:
            # Process-wide, unlike ONNX Runtime's per-session setting.
            torch.set_num_threads(self._intra_op_threads)
        return SentenceTransformer(self.model_name, device=self._device)

    def embed_sync(self, texts: list[str]) -> list[Embedding]:
        self.load()
        assert self._model is not None
        if self.backend == "torch":
            vectors = self._model.encode(
                texts, batch_size=self._batch_size, convert_to_numpy=True, show_progress_bar=False
            )
        else:
            vectors = self._model.encode(texts, batch_size=self._batch_size)
        return matryoshka(vectors)

    async def embed_query(self, text: str) -> Embedding:
        """One query's embedding, from a small LRU cache when it was asked recently."""
        cached = self._query_cache.get(text)
        if cached is not None:
            self._query_cache.move_to_end(text)
            return cached
        (embedding,) = await self.embed([text])
        if self._query_cache_size:
            self._query_cache[text] = embedding
            if len(self._query_cache) > self._query_cache_size:
                self._query_cache.popitem(last=False)
        return embedding

    async def embed(self, texts: list[str]) -> list[Embedding]:
        """Embed off the event loop; the limiter keeps CPU-bound work from piling up."""
        if not texts:
            return []
        return await anyio.to_thread.run_sync(self.embed_sync, texts, limiter=self._limiter)
