"""Initial schema: pgvector, messages, versioned memories, outbox with NOTIFY.

Revision ID: 0001_initial_schema
Revises:
Create Date: 2026-11-29 23:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from pgvector.sqlalchemy import Vector
from sqlalchemy.dialects import postgresql

from app.db.migration_safety import refuse_data_loss

revision: str = "0001_initial_schema"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Frozen copy of the 15 categories at this revision; later revisions change them explicitly.
CATEGORIES = (
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
)
OUTBOX_CHANNEL = "cognis_outbox"


def _in_list(column: str, values: Sequence[str]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


def upgrade() -> None:
    op.execute("CREATE EXTENSION IF NOT EXISTS vector")

    op.create_table(
        "messages",
        sa.Column("id", postgresql.UUID(as_uuid=True), nullable=False),
        sa.Column("user_id", sa.Text(), nullable=False),
        sa.Column("session_id", sa.Text(), nullable=True),
        sa.Column("speaker", sa.Text(), nullable=True),
        sa.Column("role", sa.Text(), server_default="user", nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("sent_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.Column("embedding_256d", Vector(256), nullable=True),
        sa.Column(
            "metadata",
            postgresql.JSONB(),
            server_default=sa.text("'{}'::jsonb"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("id", name="messages_pkey"),
    )
    op.create_index("messages_user_id_sent_at_idx", "messages", ["user_id", "sent_at"])

    op.create_table(
        "memories",
        sa.Column("id", postgresql.UUID(as_uuid=True), nullable=False),
        sa.Column("user_id", sa.Text(), nullable=False),
        sa.Column("chain_id", postgresql.UUID(as_uuid=True), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("category", sa.Text(), nullable=False),
        sa.Column("scope", sa.Text(), server_default="USER", nullable=False),
        sa.Column("session_id", sa.Text(), nullable=True),
        sa.Column("is_current", sa.Boolean(), server_default=sa.text("true"), nullable=False),
        sa.Column("replaces_id", postgresql.UUID(as_uuid=True), nullable=True),
        sa.Column("speaker", sa.Text(), nullable=True),
        sa.Column("event_time", sa.DateTime(timezone=True), nullable=True),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.Column("superseded_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("embedding_768d", Vector(768), nullable=False),
        sa.Column("embedding_256d", Vector(256), nullable=False),
        sa.Column(
            "metadata",
            postgresql.JSONB(),
            server_default=sa.text("'{}'::jsonb"),
            nullable=False,
        ),
        sa.Column("source_message_id", postgresql.UUID(as_uuid=True), nullable=True),
        # Check names are short: the naming convention (app.db.models) makes them
        # <table>_<name>_check, as it does for the models.
        sa.CheckConstraint(_in_list("scope", ("USER", "CONTEXT")), name="scope"),
        sa.CheckConstraint(_in_list("category", CATEGORIES), name="category"),
        sa.CheckConstraint("scope <> 'CONTEXT' OR session_id IS NOT NULL", name="context_session"),
        sa.CheckConstraint("length(btrim(content)) > 0", name="content_not_blank"),
        sa.CheckConstraint("is_current = (superseded_at IS NULL)", name="current_not_superseded"),
        sa.CheckConstraint("version >= 1", name="version_positive"),
        sa.CheckConstraint(
            "(version = 1) = (replaces_id IS NULL)",
            name="first_version_replaces_nothing",
        ),
        sa.ForeignKeyConstraint(["replaces_id"], ["memories.id"], name="memories_replaces_id_fkey"),
        sa.ForeignKeyConstraint(
            ["source_message_id"],
            ["messages.id"],
            name="memories_source_message_id_fkey",
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name="memories_pkey"),
    )
    op.create_index(
        "memories_embedding_256d_hnsw_idx",
        "memories",
        ["embedding_256d"],
        postgresql_using="hnsw",
        postgresql_with={"m": 16, "ef_construction": 128},
        postgresql_ops={"embedding_256d": "vector_cosine_ops"},
    )
    op.create_index(
        "memories_embedding_768d_hnsw_idx",
        "memories",
        ["embedding_768d"],
        postgresql_using="hnsw",
        postgresql_with={"m": 16, "ef_construction": 256},
        postgresql_ops={"embedding_768d": "vector_cosine_ops"},
    )
    op.create_index(
        "memories_user_current_idx",
        "memories",
        ["user_id", "is_current"],
        postgresql_where=sa.text("is_current"),
    )
    op.create_index(
        "memories_replaces_id_idx",
        "memories",
        ["replaces_id"],
        unique=True,
        postgresql_where=sa.text("replaces_id IS NOT NULL"),
    )
    op.create_index(
        "memories_chain_current_idx",
        "memories",
        ["chain_id"],
        unique=True,
        postgresql_where=sa.text("is_current"),
    )
    op.create_index("memories_chain_version_idx", "memories", ["chain_id", "version"], unique=True)
    op.create_index("memories_user_created_idx", "memories", ["user_id", "created_at", "id"])

    op.create_table(
        "outbox",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=True), nullable=False),
        sa.Column("user_id", sa.Text(), nullable=False),
        sa.Column("op", sa.Text(), nullable=False),
        sa.Column("memory_id", postgresql.UUID(as_uuid=True), nullable=True),
        sa.Column(
            "payload", postgresql.JSONB(), server_default=sa.text("'{}'::jsonb"), nullable=False
        ),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.Column("processed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("attempts", sa.Integer(), server_default="0", nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column(
            "next_attempt_at",
            sa.DateTime(timezone=True),
            server_default=sa.func.now(),
            nullable=False,
        ),
        sa.CheckConstraint(_in_list("op", ("index", "erase_user")), name="op"),
        sa.CheckConstraint("op <> 'index' OR memory_id IS NOT NULL", name="index_has_memory"),
        sa.PrimaryKeyConstraint("id", name="outbox_pkey"),
    )
    op.create_index(
        "outbox_pending_idx", "outbox", ["id"], postgresql_where=sa.text("processed_at IS NULL")
    )
    op.create_index("outbox_user_id_idx", "outbox", ["user_id"])

    # Wake the relay once per inserting statement; polling covers missed notifications.
    op.execute(
        f"""
        CREATE FUNCTION outbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM pg_notify('{OUTBOX_CHANNEL}', '');
            RETURN NULL;
        END $$;
        """
    )
    op.execute(
        "CREATE TRIGGER outbox_notify_trigger AFTER INSERT ON outbox "
        "FOR EACH STATEMENT EXECUTE FUNCTION outbox_notify()"
    )


def downgrade() -> None:
    refuse_data_loss("every memory, message and outbox row")
    op.execute("DROP TRIGGER IF EXISTS outbox_notify_trigger ON outbox")
    op.execute("DROP FUNCTION IF EXISTS outbox_notify()")
    op.drop_table("outbox")
    op.drop_table("memories")
    op.drop_table("messages")
    # The vector extension is left installed: other schemas in the database may use it.
