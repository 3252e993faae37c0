"""Settings: one pydantic-settings class, read from COGNIS_* environment variables."""

from __future__ import annotations

from functools import lru_cache
from typing import Literal, get_args

from pydantic import Field, SecretStr, ValidationInfo, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

# The 15 categories of the paper: the seed rows of the `categories` table (a deployment may add
# its own there; memories.category is a foreign key to it).
# How the embedding model runs: sentence-transformers on torch, exported to ONNX (fp32 or
# dynamic int8) and run by ONNX Runtime, or on another server behind an OpenAI-compatible
# /embeddings endpoint ("http", e.g. `python -m app embed-serve`).
EmbeddingBackend = Literal["torch", "onnx", "onnx-int8", "http"]

# The 15 categories of the paper; the database enforces them with a CHECK constraint.
Category = Literal[
    "personal_details",
    "professional",
    "health",
    "relationships",
    "preferences",
    "hobbies",
    "goals",
    "financial",
    "educational",
    "travel",
    "emotional",
    "technical_skills",
    "dietary",
    "behavioral_patterns",
    "communication_style",
]
CATEGORIES: tuple[str, ...] = get_args(Category)

# The stored vectors: the model's output zero-padded to 768D, and its re-normalised 256D prefix.
EMBEDDING_DIM = 768
COARSE_DIM = 256

# USER memories persist across sessions; CONTEXT ones belong to one session.
Scope = Literal["USER", "CONTEXT"]
SCOPES: tuple[str, ...] = get_args(Scope)

# What ingestion's extractor may decide for a fact (SPEC section 3).
OPERATIONS: tuple[str, ...] = ("ADD", "UPDATE", "DELETE", "NONE")

# The name the local LLM server answers to (COGNIS_LLM_GGUF_PATH without COGNIS_LLM_MODEL).
LOCAL_LLM_ALIAS = "local"

# The development key is accepted only while no key hashes are configured; start-up warns loudly.
DEV_API_KEY = "cognis-dev-key"


class Settings(BaseSettings):
    """Every knob of the service. Defaults are the paper's constants."""

    model_config = SettingsConfigDict(env_prefix="COGNIS_", extra="ignore")

    # Stores
    database_url: SecretStr = Field(
        description="SQLAlchemy async URL, e.g. postgresql+asyncpg://user:pw@host:5432/db"
    )
    # Background work (outbox relay, ingestion workers, reindex) claims rows of every tenant:
    # a role in cognis_background. Unset: database_url (then that role must be in it).
    worker_database_url: SecretStr | None = None
    # Alembic's role, the tables' owner. Unset: database_url.
    migration_database_url: SecretStr | None = None
    db_pool_size: int = 10
    opensearch_url: str = "http://127.0.0.1:59200"
    opensearch_username: str | None = None
    opensearch_password: SecretStr | None = None
    opensearch_index: str = "cognis-memories"
    opensearch_timeout_s: float = 5.0
    # How soon an indexed memory becomes BM25-searchable (applied when the index is created).
    opensearch_refresh_interval: str = "250ms"

    # Models
    embedding_model: str = "sentence-transformers/all-mpnet-base-v2"
    embedding_device: str = "cpu"
    # Micro-batching (app/ml/batching.py): texts of concurrent callers are gathered for at most
    # embedding_batch_wait_ms, or until embedding_batch_size are waiting, into one model call.
    embedding_batch_size: int = 32
    embedding_batch_wait_ms: float = 5.0
    # Texts per forward pass of a local model within one call, after sorting by length: small
    # passes of similar length pad least (docs/benchmarks/ingestion.md).
    embedding_forward_batch_size: int = 8
    # torch runs the sentence-transformers model; "onnx" / "onnx-int8" run it exported (once, to
    # embedding_onnx_cache_dir, default ~/.cache/cognis-memory/onnx) by ONNX Runtime: extra [onnx].
    embedding_backend: EmbeddingBackend = "torch"
    # Cores one embedding call uses (torch.set_num_threads / ORT intra-op); None: the cores
    # actually available to the process (affinity and cgroup quota).
    embedding_intra_op_threads: int | None = None
    embedding_onnx_cache_dir: str | None = None
    query_embedding_cache_size: int = 1024
    # Search queries only: their own copy of the same model with its own queue, so a search
    # never waits behind write batches. "onnx-int8" (the default) embeds a query in about half
    # torch's time, at cosine ~0.99 to torch's vector, with no recall lost on LoCoMo
    # (docs/benchmarks/locomo.md); "same" embeds queries with the memories' embedder instead.
    query_embedding_backend: EmbeddingBackend | Literal["same"] = "onnx-int8"
    # A query is one short text: one core embeds it about as fast as two, and leaves the other
    # to Postgres and to write batches (measured in docs/benchmarks/ingestion.md).
    query_embedding_intra_op_threads: int | None = 1
    # The "http" backend: an OpenAI-compatible API root (POST {url}/embeddings). embed-serve
    # requires the same bearer key from its clients when one is set.
    embedding_http_url: str | None = Field(
        default=None, description="OpenAI-compatible API root, e.g. http://embedder:8080/v1."
    )
    # None asks for COGNIS_EMBEDDING_MODEL, the model embed-serve runs from the same settings.
    embedding_http_model: str | None = None
    embedding_http_api_key: SecretStr | None = None
    # Sent as "dimensions" (Matryoshka truncation on the server); None: the model's own size.
    embedding_http_dimensions: int | None = Field(default=None, ge=1, le=EMBEDDING_DIM)
    embedding_http_timeout_s: float = 10.0
    # Retries of connection errors, timeouts, 429 and 5xx, with jittered exponential backoff.
    embedding_http_max_retries: int = Field(default=2, ge=0)
    embedding_http_backoff_base_s: float = 0.25

    # API
    host: str = "127.0.0.1"
    port: int = 8000
    api_key_hashes: str = Field(
        default="",
        description="Comma-separated SHA-256 hex digests of accepted API keys.",
    )
    # The admin API (/admin/v1: tenants and their keys) accepts these keys; none: it is off.
    admin_key_hashes: str = Field(
        default="", description="Comma-separated SHA-256 hex digests of accepted admin keys."
    )
    # Per-key rate limit (token bucket, per process): requests/s on average, in bursts of up to
    # rate_limit_burst (default: one second's worth). 0: no limit.
    rate_limit_per_s: float = Field(default=0.0, ge=0.0)
    rate_limit_burst: int | None = Field(default=None, ge=1)
    # /metrics: open when empty, else it needs one of these keys (SHA-256 hex, comma-separated).
    metrics_key_hashes: str = ""
    max_content_chars: int = 8000
    max_batch_size: int = 100
    max_metadata_bytes: int = 16_384
    log_json: bool | None = None
    log_level: str = "INFO"

    # Retrieval (SPEC section 4)
    candidates_256d: int = 200
    candidates_768d: int = 50
    bm25_candidates: int = 50
    hnsw_ef_search: int = 200
    # A user with at most this many current memories is searched exactly at 256D (their rows
    # by the user index, then sorted): under a millisecond for 600 rows, and immune to a worn
    # HNSW graph (after 14,000 rows of other users were erased, LoCoMo recall@10 fell from
    # 0.757 to 0.740 through the index). 0: always HNSW.
    exact_search_max_memories: int = Field(default=5000, ge=0)
    rrf_k: int = 10
    rrf_weight_vector: float = 0.70
    rrf_weight_bm25: float = 0.30
    default_top_k: int = 10
    max_top_k: int = 100
    temporal_weight_fused: float = 0.60
    temporal_weight_time: float = 0.40
    temporal_min_score: float = 0.10
    dedup_threshold: float = 0.99
    cross_encoder_model: str | None = Field(
        default=None, description="CrossEncoder name or local path; unset skips re-ranking."
    )
    rerank_top_n: int = 20
    history_max_versions: int = 20
    # Conversational context (app/memories/context.py): how many previous turns of a session
    # a memory's context holds; 0 stores none (and so embeds nothing extra).
    memory_context_turns: int = Field(default=1, ge=0, le=10)
    # Retrieval profile when a request names none: "paper" (SPEC's 8 stages exactly) or
    # "default" (plus the levers measured in docs/benchmarks/locomo.md).
    retrieval_profile: Literal["paper", "default"] = "default"
    # BM25 weight of a memory's context field beside its content's 1.0 (lever context_bm25).
    bm25_context_boost: float = Field(default=0.5, ge=0.0, le=10.0)
    # Proximity lever: how far apart (in moves) the query's terms may be for the extra score.
    bm25_proximity_slop: int = Field(default=5, ge=0, le=50)
    # Speaker lever: score factor (1 + boost) for memories of a speaker the query names.
    speaker_boost: float = Field(default=0.2, ge=0.0, le=10.0)
    # Feedback lever (Rocchio): the query vector moves by feedback_weight x the mean vector
    # of the best feedback_top hits, and the shortlist is scored again.
    feedback_top: int = Field(default=3, ge=1, le=20)
    feedback_weight: float = Field(default=0.75, ge=0.0, le=10.0)
    # Entity lever: a memory mentioning all the query's entities gets x (1 + entity_boost).
    entity_boost: float = Field(default=0.2, ge=0.0, le=10.0)
    # Neighbour lever: the first neighbour_top_n hits lend neighbour_decay of their score to
    # the turns just before and after them in their session.
    neighbour_top_n: int = Field(default=10, ge=0, le=100)
    neighbour_decay: float = Field(default=0.5, ge=0.0, le=1.0)
    # Time-mention lever: score factor (1 + boost) for memories naming a time, on "when" queries.
    time_mention_boost: float = Field(default=0.2, ge=0.0, le=10.0)

    # Outbox relay. One batch is claimed in one transaction and sent as bulk requests of at
    # most opensearch_bulk_max_docs documents / opensearch_bulk_max_bytes of payload each.
    relay_in_api: bool = True
    relay_batch_size: int = 1000
    opensearch_bulk_max_docs: int = 1000
    opensearch_bulk_max_bytes: int = 5_000_000
    # Bulk requests of one batch in flight at once: OpenSearch indexes them on several write
    # threads. External versions keep the result right whichever request lands first.
    opensearch_bulk_concurrency: int = 2
    relay_poll_interval_s: float = 2.0
    relay_backoff_base_s: float = 1.0
    relay_backoff_max_s: float = 300.0
    outbox_retention_hours: float = 24.0
    # How long background relays leave a user erasure to the request that made it.
    erase_handoff_s: float = 30.0
    # After an erase, every write of that user is refused (409) for this long, so a write that
    # was in flight when the erase ran cannot commit after it and bring the user back. Longer
    # than any write request can take; the id is free again afterwards.
    erase_write_block_s: float = 60.0
    # Read-your-writes: the longest a request may wait for its user's outbox rows to reach
    # OpenSearch (consistency="indexed" searches, ?wait_for=indexed writes).
    index_wait_max_ms: int = 5000
    # How often such a wait re-reads the outbox when no in-process delivery wakes it sooner.
    index_wait_poll_ms: int = 50

    # Ingestion / LLM (SPEC section 3). Without llm_base_url the deterministic extractor runs.
    llm_base_url: str | None = Field(
        default=None,
        description="OpenAI-compatible API root, e.g. http://127.0.0.1:11434/v1 (Ollama).",
    )
    llm_model: str | None = None
    llm_api_key: SecretStr | None = None
    llm_timeout_s: float = 30.0
    # Transport retries (timeouts, 429, 5xx); an invalid answer is retried once on top.
    llm_max_retries: int = 2
    llm_backoff_base_s: float = 0.5
    llm_response_format: Literal["auto", "json_schema", "json_object", "none"] = "auto"
    llm_max_tokens: int = 1024
    # A local model (app/llm/local_server.py): with a GGUF file named here, `make up` starts an
    # xllamacpp server on 127.0.0.1:llm_local_port, and the service talks to it unless
    # llm_base_url names another endpoint. One thread by default: on a shared CPU, llama.cpp
    # with more threads than free cores slows down many times (docs/benchmarks/local-llm.md).
    llm_gguf_path: str | None = None
    llm_local_port: int = 8089
    llm_local_threads: int = 1
    llm_local_context: int = 4096
    ingest_candidates: int = 10
    # The LLM gate (app/ingest/gate.py): the LLM is asked only when a current memory is at least
    # this cosine-similar to the message; otherwise the extractor without an LLM decides.
    # 0 asks it for every message. Chosen in docs/benchmarks/llm-gate.md.
    ingest_llm_gate_threshold: float = 0.3
    ingest_duplicate_threshold: float = 0.99
    ingest_max_messages: int = 100
    ingest_worker_in_api: bool = True
    ingest_worker_concurrency: int = 2
    # Workers take only jobs of their queue: separate pools (e.g. per LLM) share one database.
    ingest_queue: str = "default"
    ingest_poll_interval_s: float = 0.5
    # A job whose worker vanished is taken again once its lease has run out. The working
    # worker renews the lease every `ingest_heartbeat_s`, so the lease can be short: a crashed
    # process's jobs are taken over within seconds, however long an LLM call takes.
    ingest_lease_s: float = 15.0
    ingest_heartbeat_s: float = 5.0
    ingest_max_attempts: int = 5
    # Jobs wait this long before a worker takes them, so near-simultaneous submissions of one
    # user are applied in timestamp order rather than arrival order.
    ingest_settle_ms: int = 0
    ingest_wait_timeout_s: float = 60.0
    # Categories (app/ml/categories.py): below this gap between the two most likely categories
    # the classifier is "uncertain" and the LLM, when configured, chooses among the top three.
    category_uncertain_margin: float = 0.1
    # Where the example bank's embeddings are cached (default ~/.cache/cognis-memory/categories).
    category_cache_dir: str | None = None
    idempotency_ttl_s: float = Field(
        default=86_400.0,
        gt=0,
        description="How long the response to a write sent with an Idempotency-Key is kept and "
        "replayed to a retry with the same key (app/idempotency). A retry after this is a new "
        "request.",
    )

    @field_validator("max_content_chars", "max_batch_size", "max_top_k", "ingest_max_messages")
    @classmethod
    def _within_published_bound(cls, value: int, info: ValidationInfo) -> int:
        # The OpenAPI document publishes these bounds: a setting may lower one, never raise it.
        from app.memories import fields

        bound = {
            "max_content_chars": fields.MAX_CONTENT_CHARS,
            "max_batch_size": fields.MAX_BATCH_ITEMS,
            "ingest_max_messages": fields.MAX_BATCH_ITEMS,
            "max_top_k": fields.MAX_TOP_K,
        }[str(info.field_name)]
        if not 1 <= value <= bound:
            raise ValueError(f"must lie in [1, {bound}] (the bound in app/memories/fields.py)")
        return value

    @field_validator("rrf_weight_vector", "rrf_weight_bm25")
    @classmethod
    def _weight_in_unit_interval(cls, value: float) -> float:
        if not 0.0 <= value <= 1.0:
            raise ValueError("RRF weights must lie in [0, 1]")
        return value

    @field_validator(
        "embedding_http_url",
        "embedding_http_model",
        "embedding_http_api_key",
        "llm_gguf_path",
        mode="before",
    )
    @classmethod
    def _empty_is_unset(cls, value: object) -> object:
        # Compose passes `${VAR:-}` as an empty string: an empty key must not become "Bearer ".
        return None if value == "" else value

    @model_validator(mode="after")
    def _heartbeat_within_lease(self) -> Settings:
        if not 0 < self.ingest_heartbeat_s < self.ingest_lease_s / 2:
            raise ValueError(
                "COGNIS_INGEST_HEARTBEAT_S must be positive and under half of "
                "COGNIS_INGEST_LEASE_S, so one late renewal does not lose the lease"
            )
        return self

    @model_validator(mode="after")
    def _local_llm_is_the_default_endpoint(self) -> Settings:
        if self.llm_gguf_path and not self.llm_base_url:
            self.llm_base_url = f"http://127.0.0.1:{self.llm_local_port}/v1"
            self.llm_model = self.llm_model or LOCAL_LLM_ALIAS
        return self

    @model_validator(mode="after")
    def _http_backend_has_an_endpoint(self) -> Settings:
        query_backend_chosen = "query_embedding_backend" in self.model_fields_set
        if self.embedding_backend == "http" and not query_backend_chosen:
            # Embedding is remote: a local query model by default would defeat the point. Queries
            # keep a queue of their own (and their own requests), so they never wait behind writes.
            self.query_embedding_backend = "http"
        uses_http = "http" in (self.embedding_backend, self.query_embedding_backend)
        if uses_http and not self.embedding_http_url:
            raise ValueError("the http embedding backend needs COGNIS_EMBEDDING_HTTP_URL")
        return self

    @property
    def api_key_hash_list(self) -> tuple[str, ...]:
        return _hash_list(self.api_key_hashes)

    @property
    def admin_key_hash_list(self) -> tuple[str, ...]:
        return _hash_list(self.admin_key_hashes)

    @property
    def metrics_key_hash_list(self) -> tuple[str, ...]:
        return _hash_list(self.metrics_key_hashes)

    @property
    def dev_key_enabled(self) -> bool:
        return not self.api_key_hash_list and not self.admin_key_hash_list

    @property
    def llm_enabled(self) -> bool:
        return bool(self.llm_base_url and self.llm_model)


def _hash_list(hashes: str) -> tuple[str, ...]:
    return tuple(h.strip().lower() for h in hashes.split(",") if h.strip())


@lru_cache
def get_settings() -> Settings:
    return Settings()  # type: ignore[call-arg]
