"""ORM models: every table the service owns, in one module so Alembic sees them all."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from pgvector.sqlalchemy import Vector
from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    DateTime,
    Float,
    ForeignKey,
    Identity,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    SmallInteger,
    Text,
    UniqueConstraint,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, UUID
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from app.vocabulary import (
    COARSE_DIM,
    EMBEDDING_DIM,
    ENTITY_TYPES,
    MULTILINGUAL_DIM,
    OPERATIONS,
    SCOPES,
)

NAMING_CONVENTION = {
    "ix": "%(table_name)s_%(column_0_N_name)s_idx",
    "uq": "%(table_name)s_%(column_0_N_name)s_key",
    "ck": "%(table_name)s_%(constraint_name)s_check",
    "fk": "%(table_name)s_%(column_0_name)s_fkey",
    "pk": "%(table_name)s_pkey",
}


def _in_list(column: str, values: tuple[str, ...]) -> str:
    quoted = ", ".join(f"'{v}'" for v in values)
    return f"{column} IN ({quoted})"


def tenant_column(*, primary_key: bool = False) -> Mapped[uuid.UUID]:
    """A row's tenant: the transaction's (`cognis_tenant()`, set by app.db.tenant)."""
    return mapped_column(
        UUID(as_uuid=True),
        nullable=False,
        primary_key=primary_key,
        server_default=text("cognis_tenant()"),
    )


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class Message(Base):
    """A conversation message exactly as received, saved before any slow work."""

    __tablename__ = "messages"

    tenant_id: Mapped[uuid.UUID] = tenant_column()

    id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True, default=uuid.uuid4)
    user_id: Mapped[str] = mapped_column(Text, nullable=False)
    session_id: Mapped[str | None] = mapped_column(Text)
    # The agent and the run the conversation belongs to (0017): the memories derived from
    # the message inherit them.
    agent_id: Mapped[str | None] = mapped_column(Text)
    run_id: Mapped[str | None] = mapped_column(Text)
    speaker: Mapped[str | None] = mapped_column(Text)
    role: Mapped[str] = mapped_column(Text, nullable=False, server_default="user")
    content: Mapped[str] = mapped_column(Text, nullable=False)
    sent_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    # The sender's UTC offset: sent_at is stored as an instant, but "yesterday" means the
    # sender's yesterday, so step 2 resolves time expressions back in this offset.
    utc_offset_minutes: Mapped[int | None] = mapped_column(SmallInteger)
    created_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), nullable=False, server_default=func.now()
    )
    embedding_256d: Mapped[Any | None] = mapped_column(Vector(COARSE_DIM))
    # The model's full vector, computed once at step 1 and reused by steps 3 and 4 (the 256D
    # one is its prefix). Not indexed: it is only read back by id.
    embedding_768d: Mapped[Any | None] = mapped_column(Vector(EMBEDDING_DIM))
    metadata_: Mapped[dict[str, Any]] = mapped_column(
        "metadata", JSONB, nullable=False, server_default=text("'{}'::jsonb")
    )
    # The caller's key: a retried submission with the same key stores no second message.
    idempotency_key: Mapped[str | None] = mapped_column(Text)

    __table_args__ = (
        Index(None, "user_id", "sent_at"),
        Index(
            "messages_user_idempotency_key_idx",
            "tenant_id",
            "user_id",
            "idempotency_key",
            unique=True,
            postgresql_where=text("idempotency_key IS NOT NULL"),
        ),
    )


class Category(Base):
    """The categories a deployment files memories under: the paper's 15 are seeded by
    migration 0008, and a deployment may add its own (with example sentences the classifier
    learns from)."""

    __tablename__ = "categories"

    name: Mapped[str] = mapped_column(Text, primary_key=True)
    description: Mapped[str] = mapped_column(Text, nullable=False)
    # Labelled example sentences for the classifier (the 15 have theirs in app/ml/category_bank).
    examples: Mapped[list[str]] = mapped_column(
        ARRAY(Text), nullable=False, server_default=text("'{}'::text[]")
    )
    created_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), nullable=False, server_default=func.now()
    )

    __table_args__ = (CheckConstraint("name ~ '^[a-z][a-z0-9_]{0,62}$'", name="name_format"),)


class Memory(Base):
    """One *version* of a memory. Updates insert a new row; nothing is edited in place."""

    __tablename__ = "memories"

    tenant_id: Mapped[uuid.UUID] = tenant_column()

    id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True, default=uuid.uuid4)
    user_id: Mapped[str] = mapped_column(Text, nullable=False)
    # Root id of the version chain: all versions of one memory share it.
    chain_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), nullable=False)
    version: Mapped[int] = mapped_column(Integer, nullable=False)
    content: Mapped[str] = mapped_column(Text, nullable=False)
    category: Mapped[str] = mapped_column(
        Text, ForeignKey("categories.name", onupdate="CASCADE"), nullable=False
    )
    scope: Mapped[str] = mapped_column(Text, nullable=False, server_default="USER")
    session_id: Mapped[str | None] = mapped_column(Text)
    # Scopes beside the session (0017): the agent a memory belongs to and the run (one task
    # or episode) it came from; NULL: shared by all of the user's agents, or of no run. A
    # search naming an agent sees its memories and the shared ones (app/memories/filters/).
    agent_id: Mapped[str | None] = mapped_column(Text)
    run_id: Mapped[str | None] = mapped_column(Text)
    is_current: Mapped[bool] = mapped_column(Boolean, nullable=False, server_default=text("true"))
    replaces_id: Mapped[uuid.UUID | None] = mapped_column(
        UUID(as_uuid=True), ForeignKey("memories.id")
    )
    speaker: Mapped[str | None] = mapped_column(Text)
    event_time: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # When the fact stopped holding in the world (0016): sent with a PATCH or a DELETE. NULL:
    # not known to have ended (a DELETE without it retracts the memory, ending nothing).
    event_end: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), nullable=False, server_default=func.now()
    )
    superseded_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    embedding_768d: Mapped[Any] = mapped_column(Vector(EMBEDDING_DIM), nullable=False)
    embedding_256d: Mapped[Any] = mapped_column(Vector(COARSE_DIM), nullable=False)
    metadata_: Mapped[dict[str, Any]] = mapped_column(
        "metadata", JSONB, nullable=False, server_default=text("'{}'::jsonb")
    )
    source_message_id: Mapped[uuid.UUID | None] = mapped_column(
        UUID(as_uuid=True), ForeignKey("messages.id", ondelete="SET NULL")
    )
    # The id the memory had where it came from (a bulk import): a rerun skips what it finds.
    external_id: Mapped[str | None] = mapped_column(Text)
    # Conversational context (migration 0010): the previous turn(s) of the session, the memory
    # embedded together with them, and the chain of the turn it follows. The content itself
    # stays as given; retrieval uses these only where its profile asks for them.
    context: Mapped[str | None] = mapped_column(Text)
    context_embedding_768d: Mapped[Any | None] = mapped_column(Vector(EMBEDDING_DIM))
    follows_chain_id: Mapped[uuid.UUID | None] = mapped_column(UUID(as_uuid=True))
    # One vector per sentence of a memory of several (0021, app/memories/sentences.py); empty:
    # one sentence; NULL: not embedded yet. Retrieval reads them only through its lever.
    sentence_embeddings_768d: Mapped[list[Any] | None] = mapped_column(
        # One dimension: a vector is a list itself, and must not be read as a second one.
        ARRAY(Vector(EMBEDDING_DIM), dimensions=1)
    )
    # The time the content itself names ("yesterday" said on 8 May: 7 May), resolved against
    # the event time when written; None when it names none.
    mentioned_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # When the memory expires (0017): from then on no read shows it, and the reaper removes
    # it from both stores (app/memories/expiry_reaper.py). A property of the memory, not of a
    # version: every version of a chain carries the same value. NULL: never.
    expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # The content's language, ISO 639-1 (0028): given by the client or detected when the row
    # is made (app/ml/language.py). NULL: content without letters.
    language: Mapped[str | None] = mapped_column(Text)
    # The content's multilingual vector (0034, app/ml/multilingual.py), searched beside the
    # English model's for queries or users that are not English. NULL: written while
    # COGNIS_MULTILINGUAL_EMBEDDER was off, or before 0034 (`python -m app embed-multilingual`).
    embedding_ml: Mapped[Any | None] = mapped_column(Vector(MULTILINGUAL_DIM))
    # When the entity worker read this version for the entities it names (0039,
    # app/memories/entities.py). NULL: not yet.
    entities_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))

    __table_args__ = (
        CheckConstraint(_in_list("scope", SCOPES), name="scope"),
        CheckConstraint("scope <> 'CONTEXT' OR session_id IS NOT NULL", name="context_session"),
        CheckConstraint("length(btrim(content)) > 0", name="content_not_blank"),
        CheckConstraint("is_current = (superseded_at IS NULL)", name="current_not_superseded"),
        CheckConstraint("version >= 1", name="version_positive"),
        CheckConstraint("language ~ '^[a-z]{2}$'", name="language_code"),
        CheckConstraint(
            "(version = 1) = (replaces_id IS NULL)", name="first_version_replaces_nothing"
        ),
        # Current versions only: every vector search reads those alone, so superseded ones
        # were dead weight in the graph, walked past by filtered scans (migration 0025).
        Index(
            "memories_embedding_256d_hnsw_idx",
            "embedding_256d",
            postgresql_using="hnsw",
            postgresql_with={"m": 16, "ef_construction": 128},
            postgresql_ops={"embedding_256d": "vector_cosine_ops"},
            postgresql_where=text("is_current"),
        ),
        Index(
            "memories_embedding_ml_hnsw_idx",
            "embedding_ml",
            postgresql_using="hnsw",
            postgresql_with={"m": 16, "ef_construction": 128},
            postgresql_ops={"embedding_ml": "vector_cosine_ops"},
            postgresql_where=text("is_current"),
        ),
        # Whether an English query needs the multilingual leg: one probe (migration 0034).
        Index(
            "memories_user_other_language_idx",
            "user_id",
            postgresql_include=["tenant_id"],
            postgresql_where=text("is_current AND language IN ('ja', 'ko', 'ru', 'zh')"),
        ),
        # No HNSW index on embedding_768d: no query searches it by similarity (the 768D stage
        # re-scores a shortlist by id, exactly), and maintaining it tripled the cost of every
        # insert. See migration 0005 and docs/benchmarks/ingestion.md.
        # tenant_id included: row security's check is then read from the index, so the
        # count that chooses a search's scan never reads the table (migration 0020).
        Index(
            "memories_user_current_tenant_idx",
            "user_id",
            postgresql_include=["tenant_id"],
            postgresql_where=text("is_current"),
        ),
        # Unique: a version is replaced at most once, so a chain can never fork.
        Index(
            "memories_replaces_id_idx",
            "replaces_id",
            unique=True,
            postgresql_where=text("replaces_id IS NOT NULL"),
        ),
        # At most one current version per chain.
        Index(
            "memories_chain_current_idx",
            "chain_id",
            unique=True,
            postgresql_where=text("is_current"),
        ),
        Index("memories_chain_version_idx", "chain_id", "version", unique=True),
        # One import per external id and user of a tenant; the chain's first version has the id.
        Index(
            "memories_user_external_id_idx",
            "tenant_id",
            "user_id",
            "external_id",
            unique=True,
            postgresql_where=text("external_id IS NOT NULL AND version = 1"),
        ),
        Index("memories_user_created_idx", "user_id", "created_at", "id"),
        Index(
            "memories_user_follows_chain_id_idx",
            "user_id",
            "follows_chain_id",
            postgresql_where=text("follows_chain_id IS NOT NULL"),
        ),
        # The sentence worker's queue (0021): current memories whose sentences wait.
        Index(
            "memories_sentences_pending_idx",
            "id",
            postgresql_where=text("is_current AND sentence_embeddings_768d IS NULL"),
        ),
        # The entity worker's queue (0039): current memories not yet read for entities.
        Index(
            "memories_entities_pending_idx",
            "id",
            postgresql_where=text("is_current AND entities_at IS NULL"),
        ),
        # The reaper's scan, oldest expiry first: only memories that expire at all.
        Index(
            "memories_expires_at_idx",
            "expires_at",
            postgresql_where=text("expires_at IS NOT NULL"),
        ),
        # An agent's or a run's memories of a user (erase, list), without the shared ones.
        Index(
            "memories_user_agent_id_idx",
            "user_id",
            "agent_id",
            postgresql_where=text("agent_id IS NOT NULL"),
        ),
        Index(
            "memories_user_run_id_idx",
            "user_id",
            "run_id",
            postgresql_where=text("run_id IS NOT NULL"),
        ),
        # An analyst's policy keeps one tenant (an InitPlan): its queries over the whole
        # tenant read that tenant's entries only, and of one user that user's (0037).
        Index(None, "tenant_id", "user_id", "created_at"),
        # The key's ON DELETE SET NULL: a deleted message finds its memories here (0024).
        Index(
            "memories_source_message_id_idx",
            "source_message_id",
            postgresql_where=text("source_message_id IS NOT NULL"),
        ),
    )


# index: put a memory version's document; erase_user: delete every document of a user;
# delete_document: delete one version's document (an expired memory, reaped; 0017).
OUTBOX_OPS = ("index", "erase_user", "delete_document")


class OutboxEvent(Base):
    """A pending change for OpenSearch, written in the same transaction as the memory change."""

    __tablename__ = "outbox"

    tenant_id: Mapped[uuid.UUID] = tenant_column()

    # Monotonic id: doubles as OpenSearch's external version, so a stale event never wins.
    id: Mapped[int] = mapped_column(BigInteger, Identity(always=True), primary_key=True)
    user_id: Mapped[str] = mapped_column(Text, nullable=False)
    op: Mapped[str] = mapped_column(Text, nullable=False)
    memory_id: Mapped[uuid.UUID | None] = mapped_column(UUID(as_uuid=True))
    payload: Mapped[dict[str, Any]] = mapped_column(
        JSONB, nullable=False, server_default=text("'{}'::jsonb")
    )
    created_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), nullable=False, server_default=func.now()
    )
    processed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    attempts: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    last_error: Mapped[str | None] = mapped_column(Text)
    next_attempt_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), nullable=False, server_default=func.now()
    )

    __table_args__ = (
        CheckConstraint(_in_list("op", OUTBOX_OPS), name="op"),
        CheckConstraint("op <> 'index' OR memory_id IS NOT NULL", name="index_has_memory"),
        Index("outbox_pending_idx", "id", postgresql_where=text("processed_at IS NULL")),
        # One user's pending rows: the index lag every search reports, the read-your-writes
        # wait, and the relay's "no earlier pending erase of this user" check.
        Index(
            "outbox_user_pending_idx",
            "user_id",
            "id",
            postgresql_where=text("processed_at IS NULL"),
        ),
        Index("outbox_user_id_idx", "user_id"),
        # One user's delivered rows by delivery time: those still within the index's refresh
        # window count in the index lag (delivered, maybe not yet searchable).
        Index(
            "outbox_user_delivered_idx",
            "user_id",
            "processed_at",
            postgresql_where=text("processed_at IS NOT NULL"),
        ),
        # Delivered rows by delivery time, oldest first: the retention job's (0026).
        Index(
            "outbox_delivered_idx",
            "processed_at",
            postgresql_where=text("processed_at IS NOT NULL"),
        ),
    )


class UserErasure(Base):
    """The tombstone an erase leaves: a write of the user that began before `erased_at` is
    refused, so a write in flight when the erase ran cannot bring the user back; one that
    began after it is accepted. Holds only the id and two times; `writes_refused_until` is
    when the tombstone goes (COGNIS_ERASE_TOMBSTONE_S after the erase, longer than any write
    takes to reach its transaction), deleted then by the retention job."""

    __tablename__ = "user_erasures"

    tenant_id: Mapped[uuid.UUID] = tenant_column(primary_key=True)
    user_id: Mapped[str] = mapped_column(Text, primary_key=True)
    erased_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    writes_refused_until: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)


class MemoryExpiry(Base):
    """The audit row the expiry reaper leaves per memory it removed (0017): like an erase's,
    it says that something was removed and when, never what it said (no content, metadata or
    vectors). Deleted with the user by an erase."""

    __tablename__ = "memory_expiries"

    tenant_id: Mapped[uuid.UUID] = tenant_column(primary_key=True)
    chain_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True)
    user_id: Mapped[str] = mapped_column(Text, nullable=False)
    # How many versions of the chain were removed (from Postgres; their documents follow
    # through the outbox).
    versions: Mapped[int] = mapped_column(Integer, nullable=False)
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    reaped_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), nullable=False, server_default=func.now()
    )

    __table_args__ = (Index(None, "user_id", "reaped_at"),)


class ScopeErasure(Base):
    """The audit row a scoped erase leaves (0019): one agent's and/or one run's memories and
    messages of a user removed from both stores. Like a user erase's, it says what was removed
    and when, never what it said. Deleted with the user by an erase of the whole user."""

    __tablename__ = "scope_erasures"

    tenant_id: Mapped[uuid.UUID] = tenant_column()

    id: Mapped[int] = mapped_column(BigInteger, Identity(always=True), primary_key=True)
    user_id: Mapped[str] = mapped_column(Text, nullable=False)
    agent_id: Mapped[str | None] = mapped_column(Text)
    run_id: Mapped[str | None] = mapped_column(Text)
    memories: Mapped[int] = mapped_column(Integer, nullable=False)  # chains
    versions: Mapped[int] = mapped_column(Integer, nullable=False)
    messages: Mapped[int] = mapped_column(Integer, nullable=False)
    erased_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), nullable=False, server_default=func.now()
    )

    __table_args__ = (
        CheckConstraint("agent_id IS NOT NULL OR run_id IS NOT NULL", name="names_a_scope"),
        Index(None, "user_id", "erased_at"),
    )


TASK_STATES = ("queued", "running", "done", "failed")
EXTRACTORS = ("llm", "deterministic")
LLM_GATES = ("call", "skip")


class IngestTask(Base):
    """The ingestion jobs table: one row per message, taken with FOR UPDATE SKIP LOCKED.

    A job (what POST /messages returns) is the set of tasks sharing `job_id`."""

    __tablename__ = "ingest_tasks"

    tenant_id: Mapped[uuid.UUID] = tenant_column()

    message_id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), ForeignKey("messages.id", ondelete="CASCADE"), primary_key=True
    )
    job_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), nullable=False)
    user_id: Mapped[str] = mapped_column(Text, nullable=False)
    queue: Mapped[str] = mapped_column(Text, nullable=False, server_default="default")
    # Copy of the message timestamp: a user's tasks are applied in (sent_at, message_id) order.
    sent_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    # Scope the caller asked for (CONTEXT binds the memories to the message's session).
    scope: Mapped[str | None] = mapped_column(Text)
    state: Mapped[str] = mapped_column(Text, nullable=False, server_default="queued")
    attempts: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    available_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), nullable=False, server_default=func.now()
    )
    lease_token: Mapped[uuid.UUID | None] = mapped_column(UUID(as_uuid=True))
    lease_expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    last_error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), nullable=False, server_default=func.now()
    )
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # The W3C traceparent of the request that queued the task, when it was traced: the
    # worker's spans continue that trace (0035_task_traceparent).
    traceparent: Mapped[str | None] = mapped_column(Text)

    __table_args__ = (
        CheckConstraint(_in_list("state", TASK_STATES), name="state"),
        CheckConstraint("scope IS NULL OR " + _in_list("scope", SCOPES), name="scope"),
        Index(None, "job_id"),
        Index(
            "ingest_tasks_open_idx",
            "user_id",
            "sent_at",
            "message_id",
            postgresql_where=text("state IN ('queued', 'running')"),
        ),
        # Finished tasks, oldest first: the retention job's (0026).
        Index(
            "ingest_tasks_finished_idx",
            "finished_at",
            postgresql_where=text("state IN ('done', 'failed')"),
        ),
    )


class IngestDecision(Base):
    """Audit trail: every decision taken for a message, applied or not, and how it was made."""

    __tablename__ = "ingest_decisions"

    tenant_id: Mapped[uuid.UUID] = tenant_column()

    id: Mapped[int] = mapped_column(BigInteger, Identity(always=True), primary_key=True)
    job_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), nullable=False)
    message_id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), ForeignKey("messages.id", ondelete="CASCADE"), nullable=False
    )
    user_id: Mapped[str] = mapped_column(Text, nullable=False)
    position: Mapped[int] = mapped_column(Integer, nullable=False)
    operation: Mapped[str] = mapped_column(Text, nullable=False)
    # The existing version an UPDATE/DELETE/NONE refers to; the version an ADD/UPDATE wrote.
    target_memory_id: Mapped[uuid.UUID | None] = mapped_column(UUID(as_uuid=True))
    memory_id: Mapped[uuid.UUID | None] = mapped_column(UUID(as_uuid=True))
    content: Mapped[str | None] = mapped_column(Text)
    category: Mapped[str | None] = mapped_column(Text)
    reason: Mapped[str | None] = mapped_column(Text)
    # When the fact happened, as written to the memory (ADD, UPDATE).
    event_time: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    extractor: Mapped[str] = mapped_column(Text, nullable=False)
    # Whether the LLM was asked ("call") or the gate decided without it ("skip"); null when
    # no LLM is configured. gate_similarity: the nearest current memory's cosine it judged.
    llm_gate: Mapped[str | None] = mapped_column(Text)
    gate_similarity: Mapped[float | None] = mapped_column(Float)
    # The version of the prompt the LLM was shown (app/ingest/prompt.py PROMPT_VERSION).
    prompt_version: Mapped[str | None] = mapped_column(Text)
    model: Mapped[str | None] = mapped_column(Text)
    raw_answer_sha256: Mapped[str | None] = mapped_column(Text)
    latency_ms: Mapped[float | None] = mapped_column(Float)
    fallback_used: Mapped[bool] = mapped_column(
        Boolean, nullable=False, server_default=text("false")
    )
    # Why the LLM's answers were rejected (or the call failed) when the fallback ran.
    failure: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), nullable=False, server_default=func.now()
    )

    __table_args__ = (
        CheckConstraint(_in_list("operation", OPERATIONS), name="operation"),
        CheckConstraint(_in_list("extractor", EXTRACTORS), name="extractor"),
        CheckConstraint("llm_gate IS NULL OR " + _in_list("llm_gate", LLM_GATES), name="llm_gate"),
        Index(None, "message_id"),
        Index(None, "job_id"),
        Index(None, "user_id", "created_at"),
        # An analyst's queries over its whole tenant, per day, or of one user (0037).
        Index(None, "tenant_id", "user_id", "created_at"),
    )


IDEMPOTENCY_STATES = ("running", "done")


class IdempotencyKey(Base):
    """A write sent with an Idempotency-Key, and the response it got (app/idempotency): a
    retry with the same key, user and request is answered with that response instead of
    writing again. Written in the write's own transaction; kept until `expires_at`
    (COGNIS_IDEMPOTENCY_TTL_S), then deleted by the retention job (app/db/retention.py).

    A memory write stores its row `done`, response and all, at commit. A message submission
    stores it `running` with its job when step 1 commits, and `done` once it has answered."""

    __tablename__ = "idempotency_keys"

    tenant_id: Mapped[uuid.UUID] = tenant_column(primary_key=True)
    user_id: Mapped[str] = mapped_column(Text, primary_key=True)
    key: Mapped[str] = mapped_column(Text, primary_key=True)
    # Method and route template, e.g. "PATCH /v1/users/{user_id}/memories/{memory_id}".
    route: Mapped[str] = mapped_column(Text, nullable=False)
    # SHA-256 of the method, path, query and canonical JSON body: "the same request".
    request_hash: Mapped[bytes] = mapped_column(LargeBinary, nullable=False)
    state: Mapped[str] = mapped_column(Text, nullable=False)
    job_id: Mapped[uuid.UUID | None] = mapped_column(UUID(as_uuid=True))
    response_status: Mapped[int | None] = mapped_column(SmallInteger)
    # The body exactly as first sent (JSON bytes), so a replay is byte for byte the same.
    response_body: Mapped[bytes | None] = mapped_column(LargeBinary)
    created_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), nullable=False, server_default=func.now()
    )
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)

    __table_args__ = (
        CheckConstraint(_in_list("state", IDEMPOTENCY_STATES), name="state"),
        CheckConstraint(
            "state = 'running' OR (response_status IS NOT NULL AND response_body IS NOT NULL)",
            name="done_has_response",
        ),
        Index(None, "expires_at"),
    )


BATCH_JOB_STATES = TASK_STATES


class BatchJob(Base):
    """A batch create answered 202 (0022): its validated memories, written later in one
    transaction by a worker (app/memories/batch_jobs.py), which claims it with FOR UPDATE SKIP
    LOCKED and holds it under a renewed lease, as ingestion tasks are held. Deleted with the
    user by an erase."""

    __tablename__ = "batch_jobs"

    tenant_id: Mapped[uuid.UUID] = tenant_column()

    id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True, default=uuid.uuid4)
    user_id: Mapped[str] = mapped_column(Text, nullable=False)
    # The accepting process's COGNIS_INGEST_QUEUE: only workers of that queue take it.
    queue: Mapped[str] = mapped_column(Text, nullable=False, server_default="default")
    # The drafts, validated and as JSON (app/memories/batch_jobs.py `drafts_as_json`); emptied
    # once the job is done or failed, so that only a job in flight holds memories' content.
    batch: Mapped[list[dict[str, Any]]] = mapped_column(JSONB, nullable=False)
    memories: Mapped[int] = mapped_column(Integer, nullable=False)
    status: Mapped[str] = mapped_column(Text, nullable=False, server_default="queued")
    attempts: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    error: Mapped[str | None] = mapped_column(Text)
    available_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), nullable=False, server_default=func.now()
    )
    lease_token: Mapped[uuid.UUID | None] = mapped_column(UUID(as_uuid=True))
    lease_expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # The memories written, in batch order (null until done).
    memory_ids: Mapped[list[uuid.UUID] | None] = mapped_column(ARRAY(UUID(as_uuid=True)))
    created_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), nullable=False, server_default=func.now()
    )
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # The W3C traceparent of the request that queued the job, when it was traced: the
    # worker's spans continue that trace (0038_batch_job_traceparent).
    traceparent: Mapped[str | None] = mapped_column(Text)

    __table_args__ = (
        CheckConstraint(_in_list("status", BATCH_JOB_STATES), name="status"),
        Index(
            "batch_jobs_open_idx",
            "queue",
            "created_at",
            postgresql_where=text(_in_list("status", ("queued", "running"))),
        ),
        Index(None, "user_id"),
        # Finished jobs, oldest first: the retention job's (0026).
        Index(
            "batch_jobs_finished_idx",
            "finished_at",
            postgresql_where=text(_in_list("status", ("done", "failed"))),
        ),
    )


class Entity(Base):
    """A named thing of a user's memories (0039, docs/entities.md): a person, place,
    organisation, product, title, event, group or language, with the other forms of its name
    that are the same thing. Deleted with the user by an erase."""

    __tablename__ = "entities"

    tenant_id: Mapped[uuid.UUID] = tenant_column()

    id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), primary_key=True, server_default=text("gen_random_uuid()")
    )
    user_id: Mapped[str] = mapped_column(Text, nullable=False)
    # The longest form seen; `key` is its lower case, unique per user and type.
    name: Mapped[str] = mapped_column(Text, nullable=False)
    type: Mapped[str] = mapped_column(Text, nullable=False)
    key: Mapped[str] = mapped_column(Text, nullable=False)
    aliases: Mapped[list[str]] = mapped_column(
        ARRAY(Text), nullable=False, server_default=text("'{}'")
    )
    first_seen: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), nullable=False, server_default=func.now()
    )
    last_seen: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), nullable=False, server_default=func.now()
    )

    __table_args__ = (
        CheckConstraint(_in_list("type", ENTITY_TYPES), name="type"),
        UniqueConstraint("tenant_id", "user_id", "type", "key"),
        Index(None, "user_id"),
    )


class MemoryEntity(Base):
    """A memory version names an entity (0039): deleted with the version or the entity."""

    __tablename__ = "memory_entities"

    tenant_id: Mapped[uuid.UUID] = tenant_column()

    memory_id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), ForeignKey("memories.id", ondelete="CASCADE"), primary_key=True
    )
    entity_id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True),
        ForeignKey("entities.id", ondelete="CASCADE"),
        primary_key=True,
        index=True,
    )
    user_id: Mapped[str] = mapped_column(Text, nullable=False, index=True)
    mention: Mapped[str] = mapped_column(Text, nullable=False)


class ConsoleSession(Base):
    """A console login (0027; app/console/sessions.py): the browser's cookie holds a random
    secret, this row its SHA-256 and the API key sealed under a key derived from it. Not a
    tenant's row: the key says which tenant, at every request."""

    __tablename__ = "console_sessions"

    id: Mapped[bytes] = mapped_column(LargeBinary, primary_key=True)
    sealed_key: Mapped[bytes] = mapped_column(LargeBinary, nullable=False)
    created_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), nullable=False, server_default=func.now()
    )
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)

    __table_args__ = (Index(None, "expires_at"),)


class WebhookSubscription(Base):
    """A tenant's webhook receiver (0033; app/webhooks/): events of the wanted types are
    POSTed to `url`, signed with `secret`."""

    __tablename__ = "webhook_subscriptions"

    tenant_id: Mapped[uuid.UUID] = tenant_column()
    id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), primary_key=True, server_default=text("gen_random_uuid()")
    )
    url: Mapped[str] = mapped_column(Text, nullable=False)
    secret: Mapped[str] = mapped_column(Text, nullable=False)
    event_types: Mapped[list[str]] = mapped_column(ARRAY(Text), nullable=False)
    active: Mapped[bool] = mapped_column(Boolean, nullable=False, server_default=text("true"))
    created_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), nullable=False, server_default=func.now()
    )

    __table_args__ = (Index(None, "tenant_id"),)


class WebhookDelivery(Base):
    """One event for one subscription, queued in the transaction of the change it reports."""

    __tablename__ = "webhook_deliveries"

    tenant_id: Mapped[uuid.UUID] = tenant_column()
    id: Mapped[int] = mapped_column(BigInteger, Identity(always=True), primary_key=True)
    subscription_id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True),
        ForeignKey("webhook_subscriptions.id", ondelete="CASCADE"),
        nullable=False,
    )
    event_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), nullable=False)
    user_id: Mapped[str] = mapped_column(Text, nullable=False)
    type: Mapped[str] = mapped_column(Text, nullable=False)
    payload: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False)
    status: Mapped[str] = mapped_column(Text, nullable=False, server_default="pending")
    attempts: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    next_attempt_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), nullable=False, server_default=func.now()
    )
    created_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), nullable=False, server_default=func.now()
    )
    delivered_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))

    __table_args__ = (
        CheckConstraint(_in_list("status", ("pending", "delivered", "dead")), name="status"),
        Index(
            "webhook_deliveries_pending_idx",
            "subscription_id",
            "user_id",
            "id",
            postgresql_where=text("status = 'pending'"),
        ),
        Index(None, "subscription_id", "id"),
        Index(None, "user_id"),
        # Delivered rows by delivery time, oldest first: the retention job's (0036).
        Index(
            "webhook_deliveries_delivered_idx",
            "delivered_at",
            postgresql_where=text("status = 'delivered'"),
        ),
    )


class WebhookAttempt(Base):
    """One POST of a delivery: the delivery log."""

    __tablename__ = "webhook_attempts"

    tenant_id: Mapped[uuid.UUID] = tenant_column()
    id: Mapped[int] = mapped_column(BigInteger, Identity(always=True), primary_key=True)
    delivery_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("webhook_deliveries.id", ondelete="CASCADE"), nullable=False
    )
    attempted_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), nullable=False, server_default=func.now()
    )
    status_code: Mapped[int | None] = mapped_column(Integer)
    error: Mapped[str | None] = mapped_column(Text)
    duration_ms: Mapped[int] = mapped_column(Integer, nullable=False)

    __table_args__ = (Index(None, "delivery_id"),)
