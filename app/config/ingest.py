"""Settings of the ingestion group: `IngestSettings`, read as `settings.ingest`."""

from __future__ import annotations

from pydantic import BaseModel, Field, field_validator, model_validator

from app.config.validators import within_published_bound


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
    # Trained and chosen in docs/benchmarks/facts.md (python -m bench.facts).
    ingest_facts: bool = Field(
        default=True,
        description="without an LLM (or when its answer falls back), a user message becomes one "
        "memory per fact it states (a sentence as said, judged by the learned fact model); "
        "greetings, requests, questions and thanks stay in the message only. false: every user "
        "message is one memory, as said",
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
        default=0.73,
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
    ingest_max_wait_s: float = Field(
        default=30.0,
        ge=0,
        description="backpressure: a message is refused (429 + Retry-After, nothing stored) "
        "when its queue's backlog would keep it from being applied within this many seconds "
        "(the oldest waiting message's age, or the waiting messages at the last minute's "
        "apply rate; app/ingest/backlog.py); 0: accept every message whatever the lag",
    )
    ingest_outage_max_age_s: float = Field(
        default=6 * 3600.0,
        description="an ingestion task that fails because a dependency is unavailable (the "
        "model service unreachable, timing out or answering 503; Postgres unreachable) spends "
        "no attempt: it waits with backoff (up to a minute) for as long as the outage lasts, "
        "until its message is this old; then it is failed (`python -m app requeue-messages` "
        "queues it again)",
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
        description="most messages claimed together (one user's are decided in order and "
        "applied in one transaction; with an LLM, each in one of its own, asked with no "
        "transaction open)",
    )
    ingest_claim_max_users: int = Field(
        default=16,
        ge=1,
        le=1000,
        description="most users of one tenant claimed together: their messages are read in "
        "one query and embedded in one model call, then each user's applied in a transaction "
        "of its own (1: one user per claim)",
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

    _ingest_bound = field_validator("ingest_max_messages")(within_published_bound)

    @model_validator(mode="after")
    def _heartbeat_within_lease(self) -> IngestSettings:
        if not 0 < self.ingest_heartbeat_s < self.ingest_lease_s / 2:
            raise ValueError(
                "COGNIS_INGEST_HEARTBEAT_S must be positive and under half of "
                "COGNIS_INGEST_LEASE_S, so one late renewal does not lose the lease"
            )
        return self
