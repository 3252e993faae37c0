"""Conversational context per memory: the text around it, its own embedding, its predecessor.

`context` holds the previous turn(s) of the memory's session; `context_embedding_768d` embeds
the memory *with* that context (the stored content stays unchanged), so retrieval can use
either; `follows_chain_id` is the chain of the previous turn in the same session, which
neighbour expansion follows in both directions; `mentioned_at` is the time the content itself
names ("yesterday", "last May"), resolved against the memory's event time.

Revision ID: 0010_memory_context
Revises: 0009_bitemporal_history
Create Date: 2026-12-01 06:10:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from pgvector.sqlalchemy import Vector
from sqlalchemy.dialects.postgresql import UUID

from app.db.migration_safety import (
    create_index_concurrently,
    drop_index_concurrently,
    refuse_data_loss,
)

revision: str = "0010_memory_context"
down_revision: str | None = "0009_bitemporal_history"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Nullable with no default: adding them rewrites nothing, whatever the table's size.
    # IF NOT EXISTS: they commit before the index build below, which a rerun repeats.
    for column in (
        sa.Column("context", sa.Text(), nullable=True),
        sa.Column("context_embedding_768d", Vector(768), nullable=True),
        sa.Column("follows_chain_id", UUID(as_uuid=True), nullable=True),
        sa.Column("mentioned_at", sa.DateTime(timezone=True), nullable=True),
    ):
        op.add_column("memories", column, if_not_exists=True)
    create_index_concurrently(
        "memories_user_follows_chain_id_idx",
        "memories",
        "(user_id, follows_chain_id) WHERE follows_chain_id IS NOT NULL",
    )


def downgrade() -> None:
    refuse_data_loss("memories' context (callers may have sent it) and the times they mention")
    drop_index_concurrently("memories_user_follows_chain_id_idx")
    op.drop_column("memories", "mentioned_at")
    op.drop_column("memories", "follows_chain_id")
    op.drop_column("memories", "context_embedding_768d")
    op.drop_column("memories", "context")
