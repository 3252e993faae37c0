"""Write path: messages keep their 768D vector (one model pass per text); the 768D HNSW index
on memories goes.

No query searches memories.embedding_768d by similarity: stage 2 shortlists with the 256D HNSW
index and re-scores the shortlist exactly by id, and the ingestion and dedup queries do the
same. The index cost about two thirds of every insert (docs/benchmarks/ingestion.md). The
downgrade rebuilds it as the initial schema had it.

Revision ID: 0005_write_path
Revises: 0004_outbox_user_pending
Create Date: 2026-12-01 03:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from pgvector.sqlalchemy import Vector

from app.db.migration_safety import (
    create_index_concurrently,
    drop_index_concurrently,
    refuse_data_loss,
)

revision: str = "0005_write_path"
down_revision: str | None = "0004_outbox_user_pending"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # IF NOT EXISTS: it commits before the concurrent drop below, which a rerun repeats.
    op.add_column(
        "messages", sa.Column("embedding_768d", Vector(768), nullable=True), if_not_exists=True
    )
    drop_index_concurrently("memories_embedding_768d_hnsw_idx")


def downgrade() -> None:
    refuse_data_loss("the messages' stored 768D embeddings")
    # An HNSW build over every memory: see docs/deployment.md (maintenance_work_mem).
    create_index_concurrently(
        "memories_embedding_768d_hnsw_idx",
        "memories",
        "USING hnsw (embedding_768d vector_cosine_ops) WITH (m = 16, ef_construction = 256)",
    )
    op.drop_column("messages", "embedding_768d")
