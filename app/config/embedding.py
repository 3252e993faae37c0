"""Settings of the embedding group: `EmbeddingSettings`, read as `settings.embedding`."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, SecretStr, field_validator, model_validator

from app import vocabulary
from app.config.validators import empty_is_unset

# How the embedding model runs: sentence-transformers on torch, exported to ONNX (fp32 or
# dynamic int8) and run by ONNX Runtime, or on another server behind an OpenAI-compatible
# /embeddings endpoint ("http", e.g. `python -m app embed-serve`).
EmbeddingBackend = Literal["torch", "onnx", "onnx-int8", "http"]


class EmbeddingSettings(BaseModel):
    """Embedding.

    The model that embeds memories and queries (768D stored, its 256D prefix searched first):
    run in this process on torch or ONNX Runtime, or asked of an OpenAI-compatible server.
    """

    embedding_model: str = Field(
        default="sentence-transformers/all-mpnet-base-v2",
        description="hub name or local folder; `make up` sets the provisioned local "
        "all-mpnet-base-v2 (768D). `~/.cache/cognis-memory/models/all-MiniLM-L6-v2` is the "
        "small fast option (384D, zero-padded to 768: cosine is unchanged)",
    )
    embedding_device: str = Field(default="cpu", description="torch device")
    # Micro-batching (app/ml/scheduling/): texts of concurrent callers share one model call.
    embedding_batch_size: int = Field(
        default=32, description="most texts in one model call (micro-batch)"
    )
    embedding_batch_wait_ms: float = Field(
        default=5.0,
        description="how long the first waiting text waits for others to share its model call",
    )
    embedding_max_call_ms: float = Field(
        default=1000.0,
        ge=0,
        description="longest one model call should take while interactive work comes in (until "
        "30 s after the last single write, message or query): the batcher learns the model's "
        "time per character and adds no more bulk texts (batches, imports) to a call past this "
        "budget (queries and single writes are never split). The model cannot be interrupted, "
        "so this bounds how long a single write waits behind an import's texts (during a batch "
        "import of chat-length texts on 2 cores: 2.2x idle at 1000, 11x at 0; "
        "docs/benchmarks/ingestion.md); bulk work alone runs in full calls; 0: calls bounded by "
        "`COGNIS_EMBEDDING_BATCH_SIZE` only",
    )
    embedding_forward_batch_size: int = Field(
        default=8,
        description="texts per forward pass of a local model within one call, after sorting by "
        "length (small passes of similar length pad least on a CPU: 33 texts/s against 20 for "
        "one padded pass of 32 LoCoMo turns; docs/benchmarks/ingestion.md)",
    )
    embedding_backend: EmbeddingBackend = Field(
        default="torch",
        description="memories: `torch` (sentence-transformers), `onnx` (same vectors, cosine "
        "1.0000 to torch; ONNX Runtime, extra `[onnx]`) or `onnx-int8` (dynamic int8: ~2-3x "
        "faster for all-mpnet-base-v2 but lossy, mean cosine 0.99, top-10 overlap ~0.82 on "
        "LoCoMo). The ONNX ones export the model once on first load; `make bench-embedding` "
        "compares them; `http` asks an OpenAI-compatible embedding server "
        "(`COGNIS_EMBEDDING_HTTP_*`): the machine's model service, `embed-serve`, which `make "
        "up` starts and points every process at, as compose and terraform/ do (one model and "
        "one scheduler for every process; docs/embedding.md)",
    )
    embedding_intra_op_threads: int | None = Field(
        default=None,
        description="cores one memory-embedding call uses (torch: `torch.set_num_threads`, "
        "process-wide; ONNX: per session); unset: the cores actually available to the process "
        "(CPU affinity, capped by a cgroup CPU quota)",
    )
    embedding_onnx_cache_dir: str | None = Field(
        default=None,
        description="where ONNX exports go (`<model>-<fingerprint>/`), never the model folder; "
        "redone when the model's files change; unset: `~/.cache/cognis-memory/onnx`",
    )
    multilingual_embedder: bool = Field(
        default=True,
        description="give every memory a second, multilingual vector (multilingual Universal "
        "Sentence Encoder, 512D, in-process, ~1 ms a text) and search it beside the English "
        "model's when the query is not English or the user has memories that are not "
        "(docs/languages.md); off: memories.embedding_ml stays NULL and that leg is skipped",
    )
    query_embedding_cache_size: int = Field(
        default=1024, description="recent query embeddings kept (0 turns the cache off)"
    )
    # "onnx-int8" embeds a query in about half torch's time, at cosine ~0.99 to torch's vector,
    # with no recall lost on LoCoMo (docs/benchmarks/locomo.md).
    query_embedding_backend: EmbeddingBackend | Literal["same"] = Field(
        default="onnx-int8",
        description="search queries only: their own copy of the same model, with their own "
        "queue, so a search never waits behind write batches. `onnx-int8` embeds a query in "
        "about half torch's time with no recall lost on LoCoMo; `same` embeds queries with the "
        "memories' embedder (one model in memory); `http` when `COGNIS_EMBEDDING_BACKEND=http` "
        "and this is not set",
    )
    query_embedding_batch_wait_ms: float = Field(
        default=0.0,
        ge=0,
        description="how long a query waits for other queries to share its model call; 0: "
        "none (queries that arrive while the model is busy still share the next call): a "
        "query's embedding is its search's longest step, and a wait only adds to it "
        "(docs/benchmarks/search-latency.md)",
    )
    # Measured in docs/benchmarks/ingestion.md: one core embeds a query about as fast as two.
    query_embedding_intra_op_threads: int | None = Field(
        default=1,
        description="cores one query embedding uses (the other core stays with Postgres and "
        "write batches); unset: the cores available to the process",
    )
    embedding_http_url: str | None = Field(
        default=None,
        description="`http` backend: OpenAI-compatible API root (`POST {url}/embeddings`), e.g. "
        "`http://127.0.0.1:8080/v1`; required with `http`",
    )
    embedding_http_model: str | None = Field(
        default=None,
        description="model name sent to that server; unset: `COGNIS_EMBEDDING_MODEL` (what "
        "`embed-serve` runs from the same settings)",
    )
    embedding_http_api_key: SecretStr | None = Field(
        default=None,
        description="bearer key sent to it (and required by `embed-serve` when set)",
    )
    embedding_http_dimensions: int | None = Field(
        default=None,
        ge=1,
        le=vocabulary.EMBEDDING_DIM,
        description="`dimensions` to ask for (1-768, Matryoshka truncation on the server); "
        "unset: the model's own size",
    )
    embedding_http_timeout_s: float = Field(
        default=10.0, description="per request (beyond its deadline, for a write that has one)"
    )
    embedding_http_queue_timeout_s: float = Field(
        default=600.0,
        gt=0,
        description="per request without a deadline that is not a query (imports, ingestion, "
        "sentence vectors): how long it may wait in the embedding server's queue while queries "
        "and writes go first",
    )
    embedding_http_max_retries: int = Field(
        default=2,
        ge=0,
        description="retries of connection errors, timeouts, 429 and 5xx (exponential, "
        "jittered); then the API answers 503 with `Retry-After`, having written nothing",
    )
    embedding_http_backoff_base_s: float = Field(
        default=0.25, description="first retry's backoff, doubled on each further one"
    )

    @field_validator(
        "embedding_http_url", "embedding_http_model", "embedding_http_api_key", mode="before"
    )
    @classmethod
    def _empty_embedding_http_is_unset(cls, value: object) -> object:
        return empty_is_unset(value)

    @model_validator(mode="after")
    def _http_backend_has_an_endpoint(self) -> EmbeddingSettings:
        query_backend_chosen = "query_embedding_backend" in self.model_fields_set
        if self.embedding_backend == "http" and not query_backend_chosen:
            # Embedding is remote: a local query model by default would defeat the point. Queries
            # keep a queue of their own (and their own requests), so they never wait behind writes.
            self.query_embedding_backend = "http"
        uses_http = "http" in (self.embedding_backend, self.query_embedding_backend)
        if uses_http and not self.embedding_http_url:
            raise ValueError("the http embedding backend needs COGNIS_EMBEDDING_HTTP_URL")
        return self
