"""Prometheus metrics: retrieval stages and requests, embedding batches and queues, the outbox
backlog, OpenSearch CPU, ingestion, its LLM gate and the guard's verdicts. Dashboard and
alerts: docs/observability/."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

REGISTRY = CollectorRegistry()
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.25, 0.5, 1.0, 2.5)

STAGE_SECONDS = Histogram(
    "cognis_retrieval_stage_seconds",
    "Duration of each retrieval stage.",
    ["stage"],
    buckets=BUCKETS,
    registry=REGISTRY,
)
REQUEST_SECONDS = Histogram(
    "cognis_retrieval_seconds",
    "Duration of a whole retrieval request (server side).",
    buckets=BUCKETS,
    registry=REGISTRY,
)
MISSING_LEG = Counter(
    "cognis_retrieval_missing_leg_total",
    "Searches answered without one of their legs.",
    ["leg"],
    registry=REGISTRY,
)
MISSING_LEG.labels(leg="bm25")  # from the start, so rate() and alerts have a series


def observe(durations_ms: dict[str, float], total_ms: float, missing_legs: list[str]) -> None:
    for stage, ms in durations_ms.items():
        STAGE_SECONDS.labels(stage=stage.removesuffix("_ms")).observe(ms / 1000)
    REQUEST_SECONDS.observe(total_ms / 1000)
    for leg in missing_legs:
        MISSING_LEG.labels(leg=leg).inc()


EMBEDDED_TEXTS = Counter(
    "cognis_embedding_texts_total",
    "Texts run through an embedding model, by embedder (memories or queries).",
    ["embedder"],
    registry=REGISTRY,
)
EMBEDDING_BATCHES = Counter(
    "cognis_embedding_batches_total",
    "Embedding model calls (micro-batches; with the http backend, requests to the model "
    "service), by embedder.",
    ["embedder"],
    registry=REGISTRY,
)
EMBEDDING_BATCH_SECONDS = Histogram(
    "cognis_embedding_batch_seconds",
    "Duration of one embedding model call (with the http backend, of one request, queue included).",
    ["embedder"],
    buckets=BUCKETS,
    registry=REGISTRY,
)


# Model work waits in three scheduling classes (app/ml/scheduling/): queries, interactive
# writes, bulk work. Waits run far beyond a search's, up to a write's deadline.
WAIT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
EMBEDDING_QUEUE_TEXTS = Gauge(
    "cognis_embedding_queue_texts",
    "Texts waiting for the embedding model, by embedder and scheduling class.",
    ["embedder", "class"],
    registry=REGISTRY,
)
EMBEDDING_QUEUE_WAIT_SECONDS = Histogram(
    "cognis_embedding_queue_wait_seconds",
    "A request's wait for the embedding model until its first text went in (or until it "
    "left unstarted), by embedder and scheduling class.",
    ["embedder", "class"],
    buckets=WAIT_BUCKETS,
    registry=REGISTRY,
)
EMBEDDING_DEADLINE_SHED = Counter(
    "cognis_embedding_deadline_shed_total",
    "Requests refused (503) because their deadline passed before their texts were embedded.",
    ["embedder", "class"],
    registry=REGISTRY,
)


# Read from Postgres and OpenSearch when /metrics is scraped (app/api/health.py): the same
# values on every replica, so dashboards and alerts take max() across them.
OUTBOX_PENDING = Gauge(
    "cognis_outbox_pending",
    "Outbox events (memory changes) not yet delivered to the BM25 index, all users.",
    registry=REGISTRY,
)
OUTBOX_OLDEST_PENDING_SECONDS = Gauge(
    "cognis_outbox_oldest_pending_seconds",
    "Age of the oldest undelivered outbox event (the relay's lag); 0 when none is pending.",
    registry=REGISTRY,
)
OPENSEARCH_UP = Gauge(
    "cognis_opensearch_up",
    "1 when OpenSearch answered this scrape's node-stats call, else 0.",
    registry=REGISTRY,
)
OPENSEARCH_CPU_PERCENT = Gauge(
    "cognis_opensearch_cpu_percent",
    "CPU use of each OpenSearch node, from its node stats at scrape time.",
    ["node"],
    registry=REGISTRY,
)

INGESTED_MESSAGES = Counter(
    "cognis_ingest_messages_total",
    "Messages whose decisions were applied, by extractor (llm, deterministic) and fallback.",
    ["extractor", "fallback"],
    registry=REGISTRY,
)
INGEST_DECISIONS = Counter(
    "cognis_ingest_decisions_total",
    "Applied ingestion decisions, by operation.",
    ["operation"],
    registry=REGISTRY,
)
for _operation in ("ADD", "UPDATE", "DELETE", "NONE"):
    INGEST_DECISIONS.labels(operation=_operation)
INGEST_FAILURES = Counter(
    "cognis_ingest_task_failures_total",
    "Ingestion attempts that failed; final=true when no attempt is left.",
    ["final"],
    registry=REGISTRY,
)
for _final in ("true", "false"):
    INGEST_FAILURES.labels(final=_final)
INGEST_CLAIM_USERS = Histogram(
    "cognis_ingest_claim_users",
    "Users per ingestion claim: one claim transaction and one model call for their messages "
    "(_count: claims).",
    buckets=(1, 2, 4, 8, 16, 32),
    registry=REGISTRY,
)
INGEST_BATCH_MESSAGES = Histogram(
    "cognis_ingest_batch_messages",
    "Messages per user batch of an ingestion claim, each applied in one transaction (_count: "
    "those transactions).",
    buckets=(1, 2, 4, 8, 16, 32, 64, 128),
    registry=REGISTRY,
)
LLM_GATE = Counter(
    "cognis_ingest_llm_gate_total",
    "Messages by the LLM gate's verdict: call (a current memory is close) or skip.",
    ["verdict"],
    registry=REGISTRY,
)
LLM_ANSWERS = Counter(
    "cognis_ingest_llm_answers_total",
    "LLM answers by the guard's verdict: accepted, or rejected (then retried or fallen back).",
    ["verdict"],
    registry=REGISTRY,
)
LLM_UPDATES_VETOED = Counter(
    "cognis_ingest_llm_updates_vetoed_total",
    "LLM UPDATEs made ADDs beside their memory: the supersedes model scored the pair below "
    "COGNIS_INGEST_LLM_UPDATE_FLOOR.",
    registry=REGISTRY,
)
LLM_FALLBACKS = Counter(
    "cognis_ingest_llm_fallbacks_total",
    "Messages decided by the extractor without an LLM after the LLM failed, by cause.",
    ["cause"],
    registry=REGISTRY,
)
for _verdict in ("accepted", "rejected"):
    LLM_ANSWERS.labels(verdict=_verdict)


def observe_applied_message(extractor: str, fallback_used: bool, operations: list[str]) -> None:
    INGESTED_MESSAGES.labels(extractor=extractor, fallback=str(fallback_used).lower()).inc()
    for operation in operations:
        INGEST_DECISIONS.labels(operation=operation).inc()


RETENTION_PURGED = Counter(
    "cognis_retention_rows_purged_total",
    "Rows the retention job deleted (app/db/retention.py), by table.",
    ["table"],
    registry=REGISTRY,
)
for _table in (
    "outbox",
    "idempotency_keys",
    "ingest_tasks",
    "batch_jobs",
    "console_sessions",
    "user_erasures",
):
    RETENTION_PURGED.labels(table=_table)
# Read from Postgres at scrape time, like the outbox backlog: the same on every replica,
# whichever process runs the job.
RETENTION_OVERDUE_SECONDS = Gauge(
    "cognis_retention_overdue_seconds",
    "How long the oldest row the retention job should have deleted has been due, by table; up "
    "to COGNIS_RETENTION_INTERVAL_S while the job runs, 0 when nothing is due.",
    ["table"],
    registry=REGISTRY,
)
