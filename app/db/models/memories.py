"""A user's messages, the categories memories are filed under, and the memory versions."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from pgvector.sqlalchemy import Vector
from sqlalchemy import (
    Boolean,
    CheckConstraint,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    SmallInteger,
    Text,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, UUID
from sqlalchemy.orm import Mapped, mapped_column

from app.db.models.base import Base, in_list, tenant_column
from app.vocabulary import (
    COARSE_DIM,
    EMBEDDING_DIM,
    MULTILINGUAL_DIM,
    SCOPES,
)


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
        CheckConstraint(in_list("scope", SCOPES), name="scope"),
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
        # The foreign key to categories: a rename cascades through it (0040).
        Index(None, "category"),
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
