"""Ingestion: idempotency keys on messages, the ingest_tasks jobs table, the decision audit log.

Revision ID: 0003_ingestion
Revises: 0002_analyst_views
Create Date: 2026-11-30 09:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from app.db.migration_safety import (
    create_index_concurrently,
    drop_index_concurrently,
    refuse_data_loss,
)

revision: str = "0003_ingestion"
down_revision: str | None = "0002_analyst_views"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OPEN_TASKS = "state IN ('queued', 'running')"


def upgrade() -> None:
    # Nullable with no default: a catalog change only (its brief lock bounded by lock_timeout).
    # IF NOT EXISTS: it commits before the index build below, which a rerun repeats.
    op.add_column(
        "messages", sa.Column("idempotency_key", sa.Text(), nullable=True), if_not_exists=True
    )
    # CONCURRENTLY: messages take writes all the time; a plain build would block them all.
    create_index_concurrently(
        "messages_user_idempotency_key_idx",
        "messages",
        "(user_id, idempotency_key) WHERE idempotency_key IS NOT NULL",
        unique=True,
    )

    # Check names are short: the naming convention makes them <table>_<name>_check.
    op.create_table(
        "ingest_tasks",
        sa.Column("message_id", postgresql.UUID(as_uuid=True), nullable=False),
        sa.Column("job_id", postgresql.UUID(as_uuid=True), nullable=False),
        sa.Column("user_id", sa.Text(), nullable=False),
        sa.Column("queue", sa.Text(), server_default="default", nullable=False),
        sa.Column("sent_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("scope", sa.Text(), nullable=True),
        sa.Column("state", sa.Text(), server_default="queued", nullable=False),
        sa.Column("attempts", sa.Integer(), server_default="0", nullable=False),
        sa.Column(
            "available_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.Column("lease_token", postgresql.UUID(as_uuid=True), nullable=True),
        sa.Column("lease_expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("state IN ('queued', 'running', 'done', 'failed')", name="state"),
        sa.CheckConstraint("scope IS NULL OR scope IN ('USER', 'CONTEXT')", name="scope"),
        sa.ForeignKeyConstraint(
            ["message_id"],
            ["messages.id"],
            name="ingest_tasks_message_id_fkey",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("message_id", name="ingest_tasks_pkey"),
    )
    op.create_index("ingest_tasks_job_id_idx", "ingest_tasks", ["job_id"])
    op.create_index(
        "ingest_tasks_open_idx",
        "ingest_tasks",
        ["user_id", "sent_at", "message_id"],
        postgresql_where=sa.text(OPEN_TASKS),
    )

    op.create_table(
        "ingest_decisions",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=True), nullable=False),
        sa.Column("job_id", postgresql.UUID(as_uuid=True), nullable=False),
        sa.Column("message_id", postgresql.UUID(as_uuid=True), nullable=False),
        sa.Column("user_id", sa.Text(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("operation", sa.Text(), nullable=False),
        sa.Column("target_memory_id", postgresql.UUID(as_uuid=True), nullable=True),
        sa.Column("memory_id", postgresql.UUID(as_uuid=True), nullable=True),
        sa.Column("content", sa.Text(), nullable=True),
        sa.Column("category", sa.Text(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("extractor", sa.Text(), nullable=False),
        sa.Column("model", sa.Text(), nullable=True),
        sa.Column("raw_answer_sha256", sa.Text(), nullable=True),
        sa.Column("latency_ms", sa.Float(), nullable=True),
        sa.Column("fallback_used", sa.Boolean(), server_default=sa.text("false"), nullable=False),
        sa.Column("failure", sa.Text(), nullable=True),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.CheckConstraint("operation IN ('ADD', 'UPDATE', 'DELETE', 'NONE')", name="operation"),
        sa.CheckConstraint("extractor IN ('llm', 'deterministic')", name="extractor"),
        sa.ForeignKeyConstraint(
            ["message_id"],
            ["messages.id"],
            name="ingest_decisions_message_id_fkey",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name="ingest_decisions_pkey"),
    )
    op.create_index("ingest_decisions_message_id_idx", "ingest_decisions", ["message_id"])
    op.create_index("ingest_decisions_job_id_idx", "ingest_decisions", ["job_id"])
    op.create_index(
        "ingest_decisions_user_id_created_at_idx", "ingest_decisions", ["user_id", "created_at"]
    )


def downgrade() -> None:
    refuse_data_loss(
        "the ingestion audit trail (ingest_decisions), the queued tasks and the messages' idempotency keys"
    )
    op.drop_table("ingest_decisions")
    op.drop_table("ingest_tasks")
    drop_index_concurrently("messages_user_idempotency_key_idx")
    op.drop_column("messages", "idempotency_key")
