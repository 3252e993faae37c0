"""Settings: one pydantic-settings class, read from COGNIS_* environment variables."""

from __future__ import annotations

from functools import lru_cache
from typing import Literal

from pydantic import BaseModel, Field, SecretStr, ValidationInfo, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from app import vocabulary

# How the embedding model runs: sentence-transformers on torch, exported to ONNX (fp32 or
# dynamic int8) and run by ONNX Runtime, or on another server behind an OpenAI-compatible
# /embeddings endpoint ("http", e.g. `python -m app embed-serve`).
EmbeddingBackend = Literal["torch", "onnx", "onnx-int8", "http"]

# The name the local LLM server answers to (COGNIS_LLM_GGUF_PATH without COGNIS_LLM_MODEL).
LOCAL_LLM_ALIAS = "local"

# The development key is accepted only while no key hashes are configured; start-up warns loudly.
DEV_API_KEY = "cognis-dev-key"


# Settings come in groups, one pydantic model each; `Settings` inherits them all, so every
# module keeps reading `settings.rrf_k` and every variable stays COGNIS_<FIELD NAME>. The
# settings table of docs/configuration.md is generated from these groups
# (`python -m app.settings_doc`).


def _within_published_bound(value: int, info: ValidationInfo) -> int:
    """The OpenAPI document publishes these bounds: a setting may lower one, never raise it."""
    bound = {
        "max_content_chars": vocabulary.MAX_CONTENT_CHARS,
        "max_batch_size": vocabulary.MAX_BATCH_ITEMS,
        "ingest_max_messages": vocabulary.MAX_BATCH_ITEMS,
        "max_top_k": vocabulary.MAX_TOP_K,
    }[str(info.field_name)]
    if not 1 <= value <= bound:
        raise ValueError(f"must lie in [1, {bound}] (the bound in app/vocabulary.py)")
    return value


def _empty_is_unset(value: object) -> object:
    # Compose passes `${VAR:-}` as an empty string: an empty key must not become "Bearer ".
    return None if value == "" else value


class StoreSettings(BaseModel):
    """Stores.

    Postgres, the system of record, and OpenSearch, the BM25 index the outbox relay feeds.
    """

    database_url: SecretStr = Field(
        description="`postgresql+asyncpg://user:pw@host:port/db`: the role requests run as (a "
        "member of `cognis_rw`, e.g. `cognis_app`; never a superuser)"
    )
    # Background work claims rows of every tenant, so it needs a role in cognis_background.
    worker_database_url: SecretStr | None = Field(
        default=None,
        description="the role of the relay, the ingestion workers and reindex (a member of "
        "`cognis_background`, e.g. `cognis_worker`); unset: `COGNIS_DATABASE_URL`, whose role "
        "must then be in `cognis_background` too",
    )
    migration_database_url: SecretStr | None = Field(
        default=None,
        description="Alembic's role: the tables' owner, with CREATEROLE for migration 0007's "
        "groups; unset: `COGNIS_DATABASE_URL`",
    )
    backup_database_url: SecretStr | None = Field(
        default=None,
        description="the role `python -m app backup` dumps as: BYPASSRLS and a member of "
        "`pg_read_all_data`, nothing else (`cognis_backup`, made by `make up`; "
        "docs/operations.md)",
    )
    db_pool_size: int = Field(default=10, description="connection pool size")
    db_pooler: Literal["none", "transaction"] = Field(
        default="none",
        description="`transaction`: the database URLs reach Postgres through a pooler in "
        'transaction mode (PgBouncer; docs/deployment.md, "Connections"): no prepared '
        "statement outlives its transaction and no session setting is sent, so a server "
        "connection serves any client between transactions",
    )
    direct_database_url: SecretStr | None = Field(
        default=None,
        description="Postgres itself, past the pooler, with the role of "
        "`COGNIS_DATABASE_URL`: the LISTEN of the relay for new outbox events and of the "
        "webhook dispatcher for new deliveries (through a transaction-mode pooler they would "
        "hear nothing, and poll); unset: "
        "`COGNIS_DATABASE_URL`",
    )
    read_database_url: SecretStr | None = Field(
        default=None,
        description="a read replica of the same database (Aurora's reader endpoint, a "
        "streaming replica; `make up-cluster` makes one) with the role of `COGNIS_DATABASE_URL`: "
        "searches, lists, history, exports and the user list read from it; unset: the writer",
    )
    replica_wait_max_ms: int = Field(
        default=1000,
        ge=0,
        description="how long a read that must see the writes committed before it (lists, "
        'history, exports, `consistency: "indexed"` searches) waits for the replica to replay '
        "them before the writer serves it",
    )
    replica_retry_s: float = Field(
        default=5.0,
        gt=0,
        description="after the replica fails to answer, reads go to the writer for this long "
        "before the replica is tried again",
    )
    replica_connect_timeout_s: float = Field(
        default=2.0,
        gt=0,
        description="bound of a connection attempt to the replica (a dead host answers nothing)",
    )

    @field_validator("read_database_url", "direct_database_url", mode="before")
    @classmethod
    def _empty_read_database_is_unset(cls, value: object) -> object:
        return _empty_is_unset(value)

    opensearch_url: str = Field(
        default="http://127.0.0.1:59200",
        description="OpenSearch endpoint, or several nodes' endpoints, comma-separated: a "
        "request that finds one node dead is retried on the next (`make up-cluster` runs three)",
    )
    opensearch_username: str | None = Field(
        default=None, description="basic auth user, if the cluster needs one"
    )
    opensearch_password: SecretStr | None = Field(
        default=None, description="basic auth password, with `COGNIS_OPENSEARCH_USERNAME`"
    )
    opensearch_index: str = Field(default="cognis-memories", description="index name")
    opensearch_timeout_s: float = Field(default=5.0, description="per-request timeout")
    opensearch_refresh_interval: str = Field(
        default="250ms",
        description="how soon a delivered memory is BM25-searchable (set when the index is "
        "created)",
    )
    opensearch_shards: int = Field(
        default=1,
        ge=1,
        description="primary shards of the index, set when it is created (a change needs "
        "`python -m app reindex --recreate`); one holds some tens of millions of memories "
        "(docs/benchmarks/scale-out.md)",
    )
    opensearch_replicas: int | None = Field(
        default=None,
        ge=0,
        description="copies of each shard on other nodes, so a node lost loses no part of the "
        "index; applied to an existing index at start-up; unset: 1 when the cluster has two or "
        "more data nodes, else 0 (and never lowered on an existing index)",
    )


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
        return _empty_is_unset(value)

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


class ApiSettings(BaseModel):
    """API.

    The HTTP server: where it listens, the size of what it accepts, and its logs.
    """

    host: str = Field(
        default="127.0.0.1", description="where `python -m app serve` listens: address"
    )
    port: int = Field(
        default=8000,
        description="where `python -m app serve` listens: port (`make up` uses "
        "`COGNIS_API_PORT`, default 8000)",
    )
    max_content_chars: int = Field(
        default=8000, description="longest memory text (at most the published 8000)"
    )
    max_batch_size: int = Field(
        default=100, description="most memories per batch request (at most the published 100)"
    )
    max_metadata_bytes: int = Field(default=16_384, description="largest metadata object, as JSON")
    log_json: bool | None = Field(
        default=None, description="JSON log lines; unset: when stderr is not a terminal"
    )
    log_level: str = Field(default="INFO", description="log level")
    trace_content: bool = Field(
        default=False,
        description="traces (on when the `OTEL_*` variables ask for them: "
        "docs/observability/tracing.md) may carry memory content: a search's query, a "
        "message's text, request query strings; off: ids, counts and stage names only",
    )
    # Write deadlines (app/api/deadlines.py). Keep both below the clients' timeouts.
    write_deadline_ms: int = Field(
        default=30_000,
        ge=0,
        description="an interactive write (one memory, a PATCH, `POST /messages`' save) not done "
        "within this many ms of its arrival is refused with 503 + `Retry-After`, nothing "
        "written; a client's shorter `X-Cognis-Deadline-Ms` wins; 0: none",
    )
    idempotency_ttl_s: float = Field(
        default=86_400.0,
        gt=0,
        description="how long the response to a write sent with an `Idempotency-Key` is kept and "
        "replayed to a retry with the same key (app/idempotency); a retry after this is a new "
        "request",
    )
    console_session_hours: float = Field(
        default=12.0,
        gt=0,
        description="how long a console login lasts (then log in again); logging out ends it "
        "at once",
    )
    bulk_write_deadline_ms: int = Field(
        default=55_000,
        ge=0,
        description="the same for `POST /memories/batch` (imports have none: they commit batch "
        "by batch); keep it below your clients' timeouts (60 s in the Python client and MCP)",
    )

    _published_bounds = field_validator("max_content_chars", "max_batch_size")(
        _within_published_bound
    )


class KeySettings(BaseModel):
    """Keys.

    Who may call: the default tenant's API keys, the admin keys that manage tenants and their
    keys (`/admin/v1`), the keys of `/metrics`, and a rate limit per key.
    """

    api_key_hashes: str = Field(
        default="",
        description="comma-separated SHA-256 hex digests of accepted keys of the default "
        'tenant (`printf %s "$KEY" | sha256sum`); with no API or admin key, the development '
        "key `cognis-dev-key` is accepted (start-up warns)",
    )
    admin_key_hashes: str = Field(
        default="",
        description="the same for admin keys (`/admin/v1`: tenants and their keys); empty: the "
        "admin API is off",
    )
    metrics_key_hashes: str = Field(
        default="",
        description="SHA-256 digests of the keys that may read `/metrics`; empty: it is open",
    )
    rate_limit_per_s: float = Field(
        default=0.0,
        ge=0.0,
        description="per-key token bucket in each API process, requests/s on average; over "
        "it: 429 with `Retry-After`; 0: no limit",
    )
    rate_limit_burst: int | None = Field(
        default=None,
        ge=1,
        description="the bucket's size, the longest burst; unset: one second's worth",
    )

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


class RetrievalSettings(BaseModel):
    """Retrieval.

    The search pipeline (SPEC section 4: its 8 stages and their constants) and the levers of
    the retrieval profiles (docs/retrieval.md).
    """

    candidates_256d: int = Field(default=200, description="coarse 256D HNSW candidates")
    candidates_768d: int = Field(default=50, description="kept after exact 768D re-scoring")
    bm25_candidates: int = Field(default=50, description="BM25 hits fused")
    hnsw_ef_search: int = Field(
        default=200,
        description="`hnsw.ef_search` for the 256D scan (iterative scan, relaxed order)",
    )
    # Exact search is under a millisecond for 600 rows and immune to a worn HNSW graph (after
    # 14,000 rows of other users were erased, LoCoMo recall@10 fell from 0.757 to 0.740
    # through the index).
    exact_search_max_memories: int = Field(
        default=5000,
        ge=0,
        description="a user with at most this many current memories is searched exactly at "
        "256D (their rows by the user index, then sorted) instead of through HNSW; 0: always "
        "HNSW",
    )
    rrf_k: int = Field(default=10, description="RRF constant k")
    rrf_weight_vector: float = Field(default=0.70, description="RRF weight of the vector leg")
    rrf_weight_bm25: float = Field(default=0.30, description="RRF weight of the BM25 leg")
    default_top_k: int = Field(default=10, description="results of a search that asks for none")
    max_top_k: int = Field(
        default=100, description="most results one search may ask for (at most the published 100)"
    )
    temporal_weight_fused: float = Field(
        default=0.60, description="temporal boost: weight of the fused score"
    )
    temporal_weight_time: float = Field(
        default=0.40, description="temporal boost: weight of the time score"
    )
    temporal_min_score: float = Field(default=0.10, description="temporal score floor")
    dedup_threshold: float = Field(
        default=0.99, description="cosine above which a lower-ranked result is dropped"
    )
    min_relevance: float = Field(
        default=0.15,
        ge=0,
        le=1,
        description="results whose relevance (the query's 768D cosine to the memory, on a "
        "fixed 0-1 scale) is below this are left out of a search that sends no "
        "`min_relevance`: unrelated filler scores about 0-0.13 with all-mpnet-base-v2, and "
        "0.15 cost LoCoMo no recall@10 (-0.005 on the conversations it was chosen on, +0.001 "
        "held out; docs/benchmarks/locomo.md); 0: none left out",
    )
    multilingual_min_relevance: float = Field(
        default=0.15,
        ge=0,
        le=1,
        description="the floor for results whose relevance is the multilingual cosine (a "
        "query or a memory that is not English): calibrated on the project's Japanese and "
        "English facts (docs/languages.md); a request's `min_relevance` replaces it too",
    )
    multilingual_order_margin: float = Field(
        default=0.05,
        ge=0.0,
        le=1.0,
        description="lever `language_legs`: for a query not in the Latin script, a result of "
        "the first `relevance_order_head` may stand above one of the top k more relevant by "
        "the multilingual cosine only when they differ by at most this (docs/languages.md)",
    )
    cross_encoder_model: str | None = Field(
        default=None, description="CrossEncoder name or local path; unset skips re-ranking"
    )
    rerank_top_n: int = Field(default=20, description="candidates the cross-encoder re-scores")
    history_max_versions: int = Field(
        default=20, description="earlier versions returned per hit for history queries"
    )
    memory_context_turns: int = Field(
        default=1,
        ge=0,
        le=10,
        description="previous turns of a session stored (and embedded) as a memory's context, "
        "on write (lever `context_vector`); 0 stores none",
    )
    entities: bool = Field(
        default=True,
        description="beside the ingestion workers, find the named things of new memories "
        "with the NER model while the embedding model is idle (docs/entities.md); false: "
        "none (`python -m app extract-entities` finds them)",
    )
    sentence_vectors: bool = Field(
        default=True,
        description="beside the ingestion workers, embed the sentences of new memories of "
        "several sentences while the model is idle (at most 12 each; lever `sentence_vector`); "
        "false: none (`python -m app embed-sentences` adds them)",
    )
    retrieval_profile: Literal["paper", "default"] = Field(
        default="default",
        description="profile of a search that names none: `paper` (SPEC's 8 stages exactly) "
        "or `default` (plus the levers measured in docs/benchmarks/locomo.md)",
    )
    bm25_context_boost: float = Field(
        default=0.5,
        ge=0.0,
        le=10.0,
        description="weight of the context field beside the content's 1.0 (lever `context_bm25`)",
    )
    bm25_proximity_slop: int = Field(
        default=5,
        ge=0,
        le=50,
        description="moves a sloppy phrase match may make (lever `bm25_proximity`)",
    )
    speaker_boost: float = Field(
        default=0.2,
        ge=0.0,
        le=10.0,
        description="factor `1 + boost` for memories of a speaker the query names (lever "
        "`speaker`)",
    )
    feedback_top: int = Field(
        default=3,
        ge=1,
        le=20,
        description="hits whose mean vector the query moves towards, Rocchio (lever `feedback`)",
    )
    feedback_weight: float = Field(
        default=0.75,
        ge=0.0,
        le=10.0,
        description="how far the query vector moves towards them (lever `feedback`)",
    )
    entity_hop_top_n: int = Field(
        default=5,
        ge=1,
        le=100,
        description="the hits whose entities the entity hop follows (lever `entity_hop`)",
    )
    entity_hop_limit: int = Field(
        default=10,
        ge=0,
        le=100,
        description="memories the entity hop may bring in at most (lever `entity_hop`)",
    )
    entity_hop_decay: float = Field(
        default=0.5,
        ge=0.0,
        le=1.0,
        description="share of the linking hit's score a memory brought in by the entity hop "
        "gets (lever `entity_hop`)",
    )
    entity_hop_max_memories: int = Field(
        default=30,
        ge=1,
        le=10_000,
        description="an entity named by more of the user's memories links nothing in the "
        "entity hop (a name on every page is no link; lever `entity_hop`)",
    )
    entity_boost: float = Field(
        default=0.2,
        ge=0.0,
        le=10.0,
        description="factor `1 + boost * shared / named` for memories mentioning the query's "
        "entities (lever `entities`)",
    )
    neighbour_top_n: int = Field(
        default=10,
        ge=0,
        le=100,
        description="hits that lend their score to the turns just before and after them in "
        "their session (lever `neighbours`)",
    )
    neighbour_decay: float = Field(
        default=0.5,
        ge=0.0,
        le=1.0,
        description="the share of that score the adjacent turns get (lever `neighbours`)",
    )
    time_mention_boost: float = Field(
        default=0.2,
        ge=0.0,
        le=10.0,
        description="factor `1 + boost` for memories naming a time, on when-questions (lever "
        "`time_mentions`)",
    )
    part_slots: int = Field(
        default=2,
        ge=0,
        le=10,
        description="places each part of a multi-part question is given at the head of the "
        "results, round-robin with the whole question's (levers `query_parts`, `event_order`)",
    )
    session_top_n: int = Field(
        default=30,
        ge=1,
        le=200,
        description="candidates whose scores make their sessions' scores (lever `sessions`)",
    )
    session_boost: float = Field(
        default=0.3,
        ge=0.0,
        le=10.0,
        description="factor `1 + boost * session score / best session score` for a session's "
        "memories (lever `sessions`)",
    )
    session_decay: float = Field(
        default=0.85,
        ge=0.0,
        le=1.0,
        description="factor for each further memory of one session, so the top k spans "
        "sessions (lever `sessions`; 1: none)",
    )
    specificity_boost: float = Field(
        default=0.15,
        ge=0.0,
        le=0.5,
        description="factor `1 + boost * z` for a memory whose rarest words are z standard "
        "deviations rarer than the user's usual (z within ±2; lever `specificity`)",
    )
    relevance_order_margin: float = Field(
        default=0.1,
        ge=0.0,
        le=1.0,
        description="a result of the first `relevance_order_head` may stand above a more "
        "relevant one of the top k only when their relevance differs by at most this "
        "(lever `relevance_order`), or BM25 ranks it higher too (lever `relevance_guard`)",
    )
    relevance_order_head: int = Field(
        default=3,
        ge=1,
        le=100,
        description="the first results whose places relevance settles (levers "
        "`relevance_order`, `relevance_guard` and `language_legs`)",
    )
    specificity_prior: float = Field(
        default=50.0,
        ge=0.0,
        le=10_000.0,
        description="memories of evidence the specificity boost is shrunk by: it is `boost * "
        "n / (n + prior)` for a user of n memories, so it fades for a user with few (lever "
        "`specificity`; 0: the whole boost at any size)",
    )
    specificity_words: int = Field(
        default=5,
        ge=1,
        le=50,
        description="a memory's rarest words whose mean inverse document frequency is its "
        "specificity (lever `specificity`)",
    )
    specificity_sample: int = Field(
        default=500,
        ge=10,
        le=100_000,
        description="the user's memories whose words make the document frequencies (lever "
        "`specificity`)",
    )
    specificity_ttl_s: float = Field(
        default=300.0,
        ge=0.0,
        description="how long a user's word statistics are reused before they are counted "
        "again (lever `specificity`; 0: every search)",
    )

    _top_k_bound = field_validator("max_top_k")(_within_published_bound)

    @field_validator("rrf_weight_vector", "rrf_weight_bm25")
    @classmethod
    def _weight_in_unit_interval(cls, value: float) -> float:
        if not 0.0 <= value <= 1.0:
            raise ValueError("RRF weights must lie in [0, 1]")
        return value


class RelaySettings(BaseModel):
    """Relay.

    The outbox relay that carries committed changes to OpenSearch, the read-your-writes waits
    on it, and how an erasure is handed over. One batch is claimed in one transaction and sent
    as bulk requests.
    """

    relay_in_api: bool = Field(
        default=True, description="run the outbox relay inside the API process"
    )
    relay_batch_size: int = Field(
        default=1000, description="outbox events claimed per batch (one transaction)"
    )
    opensearch_bulk_max_docs: int = Field(
        default=1000, description="most documents in one bulk request; a batch is split"
    )
    opensearch_bulk_max_bytes: int = Field(
        default=5_000_000, description="largest payload of one bulk request; a batch is split"
    )
    # OpenSearch indexes concurrent requests on several write threads; external versions keep
    # the result right whichever request lands first.
    opensearch_bulk_concurrency: int = Field(
        default=2, description="bulk requests of one batch in flight at once"
    )
    relay_poll_interval_s: float = Field(
        default=2.0, description="polling fallback when no NOTIFY arrives"
    )
    relay_backoff_base_s: float = Field(
        default=1.0,
        description="first retry's backoff after a failed delivery (exponential, jittered)",
    )
    relay_backoff_max_s: float = Field(default=300.0, description="longest retry backoff")
    webhook_allow_private: bool = Field(
        default=False,
        description="accept webhook URLs whose host resolves to a loopback, private, link-local "
        "or unspecified address (refused by default: a tenant must not reach the internal "
        "network through the service)",
    )
    webhook_max_attempts: int = Field(
        default=8, ge=1, description="POSTs of one webhook event before it is marked dead"
    )
    webhook_timeout_s: float = Field(
        default=10.0, gt=0, description="how long a webhook receiver has to answer one POST"
    )
    webhook_backoff_base_s: float = Field(
        default=2.0,
        gt=0,
        description="first retry's backoff after a failed webhook POST (doubling, jittered, "
        "capped by COGNIS_RELAY_BACKOFF_MAX_S)",
    )
    erase_handoff_s: float = Field(
        default=30.0,
        description="how long background relays leave a user erasure to the request that made it",
    )
    # Longer than any write can take from its start to its transaction (an import included).
    erase_tombstone_s: float = Field(
        default=86400.0,
        gt=0,
        description="how long an erase's tombstone is kept: until then a write of that user "
        "that began before the erase and reaches its transaction only now is refused (409 "
        "`User erased`); a write that began after the erase is accepted at once",
    )
    # Expired memories are hidden at once by every read; the reaper only frees the space.
    expiry_reap_interval_s: float = Field(
        default=60.0,
        ge=0,
        description="how often the expiry reaper (beside the relay) removes expired memories "
        "from both stores; 0: never",
    )
    expiry_reap_batch_size: int = Field(
        default=500,
        ge=1,
        description="expired memory versions the reaper removes per transaction",
    )
    index_wait_max_ms: int = Field(
        default=5000,
        description='default and maximum `wait_timeout_ms` of `consistency: "indexed"` and '
        "`?wait_for=indexed`",
    )
    index_wait_poll_ms: int = Field(
        default=50,
        description="how often such a wait re-reads the outbox (a delivery in the same process "
        "wakes it sooner)",
    )
    index_check_interval_s: float = Field(
        default=30.0,
        ge=0,
        description="how often the API compares the BM25 index's document count with the memory "
        "versions Postgres says it should hold (`/ready` `index`; searches say `stale` while it "
        "is behind); 0: never",
    )
    index_requeue_empty: bool = Field(
        default=True,
        description="when that check finds the index empty while Postgres holds delivered "
        "memories (a new cluster, a deleted index), re-queue every memory version for "
        "indexing; false: only report it (`make reindex` rebuilds it)",
    )


class RetentionSettings(BaseModel):
    """Retention.

    The retention job (app/db/retention.py) deletes rows whose use is over, in batches of one
    short transaction each, beside the outbox relay: at start-up, then every interval.
    `python -m app retention` (`make retention`) runs one pass.
    """

    retention_interval_s: float = Field(
        default=3600.0,
        ge=0,
        description="how often the retention job runs (and once at start-up) where the relay "
        "runs; 0: never (run `python -m app retention` instead)",
    )
    retention_batch_size: int = Field(
        default=1000,
        ge=1,
        le=100_000,
        description="most rows one delete removes, in a transaction of its own",
    )
    outbox_retention_hours: float = Field(
        default=24.0, description="delivered outbox events are deleted this long after delivery"
    )
    ingest_task_retention_days: float = Field(
        default=7.0,
        ge=0,
        description="finished ingestion tasks (done or failed) are deleted this long after they "
        "finished, and `GET .../jobs/{job_id}` then answers 404 (the messages and the decision "
        "audit trail stay); 0: kept forever",
    )
    batch_job_retention_days: float = Field(
        default=7.0,
        ge=0,
        description="finished batch jobs (done or failed) are deleted this long after they "
        "finished, and `GET .../memories/batch/jobs/{job_id}` then answers 404 (the memories "
        "stay); 0: kept forever",
    )
    webhook_retention_days: float = Field(
        default=7.0,
        ge=0,
        description="delivered webhook events are deleted, with their attempts, this long after "
        "delivery, and leave the delivery log (pending and dead ones stay); 0: kept forever",
    )


class LlmSettings(BaseModel):
    """LLM.

    The OpenAI-compatible model ingestion asks (SPEC section 3), remote or a local GGUF file.
    Without one, the deterministic extractor decides.
    """

    llm_base_url: str | None = Field(
        default=None,
        description="OpenAI-compatible API root (e.g. `http://127.0.0.1:11434/v1`, Ollama); "
        "unset: deterministic extractor",
    )
    llm_model: str | None = Field(default=None, description="model name sent to that server")
    llm_api_key: SecretStr | None = Field(
        default=None, description="bearer key, if the server needs one"
    )
    llm_timeout_s: float = Field(default=30.0, description="per request")
    llm_max_retries: int = Field(
        default=2,
        description="transport retries (timeouts, 429, 5xx), exponential and jittered; an "
        "invalid answer is retried once on top",
    )
    llm_backoff_base_s: float = Field(
        default=0.5, description="first retry's backoff, doubled on each further one"
    )
    llm_response_format: Literal["auto", "json_schema", "json_object", "none"] = Field(
        default="auto",
        description="`json_schema`, `json_object`, `none`, or `auto` (try them in that order)",
    )
    llm_max_tokens: int = Field(default=1024, description="answer length limit")
    llm_gguf_path: str | None = Field(
        default=None,
        description="a GGUF file: `make up` serves it locally (xllamacpp, "
        "app/llm/local_server.py) and the service uses it unless `COGNIS_LLM_BASE_URL` is set; "
        "`qwen-1.5b`, `qwen-0.5b` or `smollm2` (the test model) in `make up` name a model "
        "scripts/install-llm.sh provides",
    )
    llm_local_port: int = Field(default=8089, description="the local server's port (on 127.0.0.1)")
    # On a shared CPU, llama.cpp with more threads than free cores slows down many times
    # (docs/benchmarks/local-llm.md).
    llm_local_threads: int = Field(default=1, description="the local server's threads")
    llm_local_context: int = Field(default=4096, description="the local server's context size")

    @field_validator("llm_gguf_path", mode="before")
    @classmethod
    def _empty_gguf_path_is_unset(cls, value: object) -> object:
        return _empty_is_unset(value)

    @model_validator(mode="after")
    def _local_llm_is_the_default_endpoint(self) -> LlmSettings:
        if self.llm_gguf_path and not self.llm_base_url:
            self.llm_base_url = f"http://127.0.0.1:{self.llm_local_port}/v1"
            self.llm_model = self.llm_model or LOCAL_LLM_ALIAS
        return self

    @property
    def llm_enabled(self) -> bool:
        return bool(self.llm_base_url and self.llm_model)


class IngestSettings(BaseModel):
    """Ingestion.

    Conversation messages in, versioned memories out (SPEC section 3): the decision's inputs,
    the job queue and its workers, and the category classifier.
    """

    ingest_candidates: int = Field(
        default=10, description="similar current memories shown to the extractor"
    )
    # Chosen in docs/benchmarks/llm-gate.md.
    ingest_llm_gate_threshold: float = Field(
        default=0.3,
        description="the LLM is asked only when a current memory is at least this "
        "cosine-similar to the message (else the extractor without an LLM decides); 0: always",
    )
    ingest_duplicate_threshold: float = Field(
        default=0.99, description="cosine at which a new fact is a duplicate (NONE)"
    )
    # Chosen in docs/benchmarks/corrections.md.
    ingest_corrections: bool = Field(
        default=True,
        description="without an LLM (or when its answer falls back), a message that says "
        '"forget that …", "I no longer …", "actually, I …" or "I moved to …" '
        "updates or ends the one current memory it is about, instead of adding a memory",
    )
    ingest_correction_threshold: float = Field(
        default=0.6,
        ge=0.0,
        le=1.0,
        description="least cosine between a correction's claim and the memory it updates or ends "
        "(below it the message is added as a new memory)",
    )
    # Trained and chosen in docs/benchmarks/supersedes.md (python -m bench.supersedes).
    ingest_supersedes: bool = Field(
        default=True,
        description="without an LLM (or when its answer falls back), and where no explicit "
        "correction applies, a user message whose sentence the learned supersedes model scores "
        "at or above COGNIS_INGEST_SUPERSEDES_THRESHOLD against a current memory of one sentence "
        "becomes an UPDATE of that memory (the message's other sentences are added)",
    )
    ingest_supersedes_threshold: float = Field(
        default=0.68,
        ge=0.0,
        le=1.0,
        description="least supersedes score for an UPDATE: the threshold shipped with the model "
        "(cross-validated precision >= 0.95); higher is surer, lower finds more updates",
    )
    # Trained and chosen in docs/benchmarks/supersedes.md, "Japanese" (--language ja).
    ingest_supersedes_threshold_ja: float = Field(
        default=0.72,
        ge=0.0,
        le=1.0,
        description="the same for a Japanese message, judged by the Japanese supersedes model over "
        "the multilingual vectors (needs COGNIS_MULTILINGUAL_EMBEDDER): the threshold shipped with "
        "that model (cross-validated precision >= 0.95)",
    )
    ingest_llm_update_floor: float = Field(
        default=0.25,
        ge=0.0,
        le=1.0,
        description="with an LLM: its UPDATE of a memory the supersedes model scores below this "
        "becomes an ADD beside it, the memory kept current (precision first; "
        "docs/benchmarks/llm-updates.md); 0 takes every LLM UPDATE",
    )
    ingest_max_messages: int = Field(
        default=100, description="most messages per request (at most the published 100)"
    )
    ingest_worker_in_api: bool = Field(
        default=True,
        description="run ingestion workers inside the API process, and beside them the worker "
        "of batch creates answered 202",
    )
    ingest_worker_concurrency: int = Field(
        default=2, description="worker loops per process (different users in parallel)"
    )
    ingest_queue: str = Field(
        default="default",
        description="job queue this process submits to and works on (separate worker pools, "
        "e.g. per LLM, share one database)",
    )
    ingest_poll_interval_s: float = Field(
        default=0.5,
        description="worker polling when idle, ingestion and batch jobs (the API wakes its own "
        "workers at once)",
    )
    # The lease can be short because the working worker renews it: a crashed process's jobs
    # are taken over within seconds, however long an LLM call takes.
    ingest_lease_s: float = Field(
        default=15.0,
        description="an ingestion or batch job whose worker vanished is taken again after this",
    )
    ingest_heartbeat_s: float = Field(
        default=5.0,
        description="a working worker renews its job's lease this often (under half the lease; "
        "ingestion and batch jobs)",
    )
    ingest_max_attempts: int = Field(
        default=5,
        description="attempts before a job is marked failed (an ingestion job's message stays "
        "stored; a batch job writes none of its memories)",
    )
    ingest_settle_ms: int = Field(
        default=0,
        description="delay before a job can be taken, so near-simultaneous messages of a user "
        "apply in timestamp order rather than arrival order",
    )
    ingest_wait_timeout_s: float = Field(
        default=60.0,
        description="longest `wait=true` request (then it answers 202 with the job)",
    )
    ingest_claim_max_messages: int = Field(
        default=32,
        ge=1,
        le=1000,
        description="most messages of one user claimed together, decided in order and applied "
        "in one transaction; with an LLM that transaction stays open while each is decided: "
        "lower it when LLM calls are slow",
    )
    category_uncertain_margin: float = Field(
        default=0.1,
        description="below this gap between the two likeliest categories the classifier is "
        "uncertain, and the LLM (if any) picks among the top three",
    )
    category_cache_dir: str | None = Field(
        default=None,
        description="cached embeddings of the category example bank; unset: "
        "`~/.cache/cognis-memory/categories`",
    )

    _ingest_bound = field_validator("ingest_max_messages")(_within_published_bound)

    @model_validator(mode="after")
    def _heartbeat_within_lease(self) -> IngestSettings:
        if not 0 < self.ingest_heartbeat_s < self.ingest_lease_s / 2:
            raise ValueError(
                "COGNIS_INGEST_HEARTBEAT_S must be positive and under half of "
                "COGNIS_INGEST_LEASE_S, so one late renewal does not lose the lease"
            )
        return self


class Settings(
    StoreSettings,
    EmbeddingSettings,
    ApiSettings,
    KeySettings,
    RetrievalSettings,
    RelaySettings,
    RetentionSettings,
    LlmSettings,
    IngestSettings,
    BaseSettings,
):
    """Every knob of the service, read from COGNIS_* variables. Defaults are the paper's
    constants."""

    model_config = SettingsConfigDict(env_prefix="COGNIS_", extra="ignore")

    @model_validator(mode="after")
    def _jobs_outlive_their_keys(self) -> Settings:
        # A retried submission replays its key's response, which names its job: the job must
        # still be there to be polled for as long as the key is.
        for name in ("ingest_task_retention_days", "batch_job_retention_days"):
            days = getattr(self, name)
            if 0 < days * 86_400 < self.idempotency_ttl_s:
                raise ValueError(
                    f"COGNIS_{name.upper()} must be 0 (forever) or at least "
                    "COGNIS_IDEMPOTENCY_TTL_S, so a replayed response never names a job "
                    "that is gone"
                )
        return self


# The groups in the order docs/configuration.md lists them.
SETTINGS_GROUPS: tuple[type[BaseModel], ...] = (
    StoreSettings,
    EmbeddingSettings,
    ApiSettings,
    KeySettings,
    RetrievalSettings,
    RelaySettings,
    RetentionSettings,
    LlmSettings,
    IngestSettings,
)


def _hash_list(hashes: str) -> tuple[str, ...]:
    return tuple(h.strip().lower() for h in hashes.split(",") if h.strip())


@lru_cache
def get_settings() -> Settings:
    return Settings()  # type: ignore[call-arg]
