"""Bulk import: memories.external_id, unique per user on the first version of a chain.

Revision ID: 0006_memory_external_ids
Revises: 0005_write_path
Create Date: 2026-12-01 03:10:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from app.db.migration_safety import (
    create_index_concurrently,
    refuse_data_loss,
)

revision: str = "0006_memory_external_ids"
down_revision: str | None = "0005_write_path"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Nullable with no default: adding it rewrites nothing, whatever the table's size.
    # IF NOT EXISTS: it commits before the index build below, which a rerun repeats.
    op.add_column(
        "memories", sa.Column("external_id", sa.Text(), nullable=True), if_not_exists=True
    )
    create_index_concurrently(
        "memories_user_external_id_idx",
        "memories",
        "(user_id, external_id) WHERE external_id IS NOT NULL AND version = 1",
        unique=True,
    )


def downgrade() -> None:
    refuse_data_loss("the external ids of imported memories (a rerun import would duplicate them)")
    # The unique index goes with its column.
    op.drop_column("memories", "external_id")
