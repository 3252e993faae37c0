"""Matryoshka embeddings: one 768D vector per text and its re-normalised 256D prefix."""

from __future__ import annotations

import asyncio
import copy
import os
import time
import uuid
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args

import numpy as np
import structlog

from app import tracing
from app.config import EmbeddingBackend, EmbeddingSettings
from app.ml.multilingual import MultilingualEncoder, shared_encoder
from app.ml.offline import offline_if_local
from app.ml.scheduling.dispatcher import MicroBatcher, QueueObserver
from app.ml.scheduling.speed import MIN_LEARN_CHARS, MIN_LEARN_TOKENS, character_costs
from app.ml.scheduling.work import Work, WorkClass
from app.vocabulary import COARSE_DIM, EMBEDDING_DIM

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
    full = unit_prefix(vectors, EMBEDDING_DIM)
    coarse = unit_prefix(full, COARSE_DIM)
    return [Embedding(full=f, coarse=c) for f, c in zip(full, coarse, strict=True)]


def unit_prefix(vectors: np.ndarray, dimensions: int) -> np.ndarray:
    """The first `dimensions` values of each row, re-normalised to unit length: the Matryoshka
    truncation (e256 = e768[:256] / ||e768[:256]||)."""
    prefix = vectors[:, :dimensions]
    norms: np.ndarray = np.clip(np.linalg.norm(prefix, axis=1, keepdims=True), 1e-12, None)
    return prefix / norms


def available_cores() -> int:
    """Cores this process may really use: its CPU affinity, capped by a cgroup v2 quota
    (a container limited to 1.5 CPUs on a 16-core host gets 2, not 16)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    cores = cores or 1
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()[:2]
        if quota != "max":
            cores = min(cores, max(1, -(-int(quota) // int(period))))
    except (OSError, ValueError):
        pass
    return cores


# Requests of one http embedder waiting in the model service at once (threads made on demand).
HTTP_SENDERS = 64

# What the micro-batcher counts a text's model time in: characters (no tokenizer needed before
# the model loads), or the model's own tokens (embed-serve, which loads it at start).
CostUnit = Literal["characters", "tokens"]


class TokenCounter:
    """Texts' token counts as a model reads them, from a copy of its tokenizer.

    The scheduler counts on the event loop's thread while the model tokenizes on its own, and a
    fast tokenizer's padding and truncation are settings each call sets: sharing the model's
    made a model call pad to a length the counting call had just switched off ("Unable to
    create tensor", a 500 under load)."""

    def __init__(self, tokenizer: Any, max_length: int) -> None:
        self._tokenizer = copy.deepcopy(tokenizer)
        self._max_length = max_length

    def __call__(self, texts: Sequence[str]) -> list[int]:
        ids = self._tokenizer(list(texts), truncation=True, max_length=self._max_length)
        return [len(i) for i in ids["input_ids"]]


class Embedder:
    """A sentence embedding model behind a micro-batching queue (app/ml/scheduling/).

    Every text the service embeds goes through `embed` or `embed_query` (searches), with the
    `Work` it is done for: its scheduling class, tenant and user (app/ml/scheduling/);
    concurrent callers share model calls. With the `http` backend the queue is the embedding
    server's, shared by every process on the machine: each request goes to it at once, with
    its work, and the server schedules it among everyone's (app/ml/embedding_server.py)."""

    def __init__(
        self,
        model_name_or_path: str,
        device: str = "cpu",
        batch_size: int = 32,
        batch_wait_ms: float = 5.0,
        max_call_ms: float = 0.0,
        forward_batch_size: int = 8,
        query_cache_size: int = 0,
        backend: EmbeddingBackend = "torch",
        intra_op_threads: int | None = None,
        onnx_cache_dir: str | None = None,
        observer: QueueObserver | None = None,
        http_endpoint: HttpEndpoint | None = None,
        cost_unit: CostUnit = "characters",
        multilingual: MultilingualEncoder | None = None,
    ) -> None:
        if backend not in get_args(EmbeddingBackend):
            raise ValueError(f"unknown embedding backend {backend!r}")
        self.model_name = model_name_or_path
        self.backend = backend
        # The second, multilingual vector of every memory and query (app/ml/multilingual.py);
        # None: COGNIS_MULTILINGUAL_EMBEDDER is off, memories get none and searches skip its leg.
        self.multilingual = multilingual
        # None follows the cores actually available to the process.
        self._intra_op_threads = intra_op_threads or available_cores()
        self._onnx_cache_dir = onnx_cache_dir
        self._http_endpoint = http_endpoint
        self._device = device
        # A local model runs a call as forward passes of `forward_batch_size` texts of similar
        # length (sorted first): on a CPU, small batches that pad little beat one padded batch
        # (LoCoMo turns, gathered 32 at a time: 33 texts/s in passes of 8, 20 in one pass).
        # A remote server gets the whole call in one request.
        self._forward_batch_size = batch_size if backend == "http" else forward_batch_size
        self.cost_unit = cost_unit
        self._observer = observer
        self.batcher: MicroBatcher[Embedding] = MicroBatcher(
            self.embed_sync,
            max_batch=batch_size,
            max_wait_s=batch_wait_ms / 1000,
            observer=observer,
            max_call_s=max_call_ms / 1000,
            costs=self.token_counts if cost_unit == "tokens" else character_costs,
            min_learn_cost=MIN_LEARN_TOKENS if cost_unit == "tokens" else MIN_LEARN_CHARS,
        )
        self._model: Any = None
        self._token_counter: TokenCounter | None = None
        # The http backend's requests wait in the server's queue, each on a thread of its own.
        self._senders = ThreadPoolExecutor(HTTP_SENDERS, thread_name_prefix="embed-http")
        self._query_cache_size = query_cache_size
        self._query_cache: OrderedDict[str, Embedding] = OrderedDict()
        self._queries_in_flight: dict[str, asyncio.Future[Embedding]] = {}

    @property
    def loaded(self) -> bool:
        return self._model is not None

    async def unready(self) -> str | None:
        """None when the model can embed now; else why not: "loading", or for the http backend
        what its server's /health says ("unreachable: ConnectError", ...)."""
        if self._model is None:
            return "loading"
        if self.backend != "http":
            return None
        return await asyncio.get_running_loop().run_in_executor(self._senders, self._model.probe)

    def load(self) -> None:
        if self.multilingual is not None:
            self.multilingual.load()  # once per process: the embedders share it
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
        if self.cost_unit == "tokens" and self.backend != "http":
            # Both local models name their tokenizer and truncation length alike.
            self._token_counter = TokenCounter(self._model.tokenizer, self._model.max_seq_length)
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

        # Process-wide, unlike ONNX Runtime's per-session setting.
        torch.set_num_threads(self._intra_op_threads)
        return SentenceTransformer(self.model_name, device=self._device)

    def token_counts(self, texts: Sequence[str]) -> list[int]:
        """Each text's tokens as the model reads them (truncated where it truncates); a
        quarter of its characters while no local tokenizer is loaded."""
        if self._token_counter is not None:
            return self._token_counter(texts)
        return [max(1, c // 4) for c in character_costs(texts)]

    def embed_sync(self, texts: list[str]) -> list[Embedding]:
        """One model call, on the caller's thread (the batcher's worker thread)."""
        self.load()
        assert self._model is not None
        if self.backend == "torch":
            vectors = self._model.encode(
                texts,
                batch_size=self._forward_batch_size,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        else:
            vectors = self._model.encode(texts, batch_size=self._forward_batch_size)
        return matryoshka(vectors)

    async def embed_query(
        self, text: str, tenant: uuid.UUID | None = None, user: str | None = None
    ) -> Embedding:
        """One query's embedding (class QUERY: ahead of every write), from a small LRU cache
        when it was asked recently, or from the request already under way for the same text
        (`start_query`'s, or a concurrent search's)."""
        cached = self._query_cache.get(text)
        if cached is not None:
            self._query_cache.move_to_end(text)
            return cached
        # Shielded: a search that goes away leaves the request to the others awaiting it.
        return await asyncio.shield(self.start_query(text, tenant, user))

    def start_query(
        self, text: str, tenant: uuid.UUID | None = None, user: str | None = None
    ) -> asyncio.Future[Embedding]:
        """The query's embedding under way, without waiting for it: a search starts it while
        it still reads what decides its final text (app/retrieval/early_embedding.py), and
        `embed_query` of the same text then awaits this request instead of sending another."""
        loop = asyncio.get_running_loop()
        if (cached := self._query_cache.get(text)) is not None:
            done: asyncio.Future[Embedding] = loop.create_future()
            done.set_result(cached)
            return done
        pending = self._queries_in_flight.get(text)
        if pending is not None and pending.get_loop() is loop:
            return pending
        pending = asyncio.ensure_future(self._embed_new_query(text, tenant, user))
        self._queries_in_flight[text] = pending
        pending.add_done_callback(lambda done: self._query_landed(text, done))
        return pending

    async def _embed_new_query(
        self, text: str, tenant: uuid.UUID | None, user: str | None
    ) -> Embedding:
        (embedding,) = await self.embed([text], Work(WorkClass.QUERY, tenant, user))
        if self._query_cache_size:
            self._query_cache[text] = embedding
            if len(self._query_cache) > self._query_cache_size:
                self._query_cache.popitem(last=False)
        return embedding

    def _query_landed(self, text: str, done: asyncio.Future[Embedding]) -> None:
        if self._queries_in_flight.get(text) is done:
            del self._queries_in_flight[text]
        if not done.cancelled():
            done.exception()  # retrieved: an early request nobody awaited may have failed

    async def embed(self, texts: list[str], work: Work) -> list[Embedding]:
        """Embed off the event loop, batched with whatever else is waiting for the model, in
        the turn of `work`'s class, tenant and user; DeadlineExceededError if its deadline
        passes first. While tracing, a span `embedding.embed` (the wait and the model call;
        with the http backend the request to the model service below it)."""
        if not tracing.enabled() or not texts:
            return await self._embed(texts, work)
        attributes = {
            "cognis.embedding.texts": len(texts),
            "cognis.embedding.work_class": work.work_class.label,
            "cognis.embedding.backend": self.backend,
        }
        with tracing.span("embedding.embed", attributes):
            return await self._embed(texts, work)

    async def _embed(self, texts: list[str], work: Work) -> list[Embedding]:
        if self.backend != "http":
            return await self.batcher.submit(texts, work)
        # The server schedules: every request goes at once, a write's on a thread of this
        # embedder's own pool, a query's from the event loop (HttpEncoder.encode_query), so a
        # query never waits for a thread that this process's bulk requests hold while they wait
        # in the server's queue.
        if not texts:
            return []
        self.batcher.arrived(work)  # this process's idle clock (the sentence worker's)
        self.load()
        started = time.monotonic()
        if work.work_class is WorkClass.QUERY:
            # A query's one short request goes from the event loop, without the thread hop.
            vectors = await self._model.encode_query(texts, work)
        else:
            vectors = await asyncio.get_running_loop().run_in_executor(
                # In the caller's trace context: the request carries its traceparent.
                self._senders,
                tracing.in_this_context(self._model.encode_work),
                texts,
                work,
            )
        # From this process's side, a request is one model call (the server's own calls may
        # gather it with other processes' texts): /metrics counts requests and texts.
        if self._observer is not None:
            self._observer.batch(len(texts), time.monotonic() - started)
        return matryoshka(vectors)

    def idle_s(self) -> float:
        """Seconds since the model last had work other than background work to do (from this
        process: the embedding server also keeps background work for when nobody waits)."""
        return self.batcher.idle_s()


def build_embedder(
    embedding: EmbeddingSettings,
    backend: EmbeddingBackend,
    intra_op_threads: int | None,
    observer: QueueObserver | None = None,
    cost_unit: CostUnit = "characters",
    queries: bool = False,
) -> Embedder:
    """An embedder as the settings describe it (the API's, the worker's, embed-serve's); with
    `queries`, the queries' own (it lingers for companions as long as queries are set to)."""
    from app.ml.http_encoder import HttpEndpoint

    return Embedder(
        embedding.embedding_model,
        device=embedding.embedding_device,
        batch_size=embedding.embedding_batch_size,
        # A query's vector is its own: int8's dynamic quantisation scales a pass by all of its
        # texts (cosine 0.96-0.99 between a query alone and in a pass of four), so queries that
        # share a call still run a pass each (one core gains little from batching them).
        forward_batch_size=1 if queries else embedding.embedding_forward_batch_size,
        batch_wait_ms=(
            embedding.query_embedding_batch_wait_ms
            if queries
            else embedding.embedding_batch_wait_ms
        ),
        max_call_ms=embedding.embedding_max_call_ms,
        query_cache_size=embedding.query_embedding_cache_size,
        backend=backend,
        intra_op_threads=intra_op_threads,
        onnx_cache_dir=embedding.embedding_onnx_cache_dir,
        observer=observer,
        http_endpoint=HttpEndpoint.from_settings(embedding) if backend == "http" else None,
        cost_unit=cost_unit,
        multilingual=shared_encoder() if embedding.multilingual_embedder else None,
    )
