"""Bulk import: memories.external_id, unique per user on the first version of a chain.

Revision ID: 0006_memory_external_ids
Revises: 0005_write_path
Create Date: 2026-12-01 03:10:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006_memory_external_ids"
down_revision: str | None = "0005_write_path"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Nullable with no default: adding it rewrites nothing, whatever the table's size.
    op.add_column("memories", sa.Column("external_id", sa.Text(), nullable=True))
    op.create_index(
        "memories_user_external_id_idx",
        "memories",
        ["user_id", "external_id"],
        unique=True,
        postgresql_where=sa.text("external_id IS NOT NULL AND version = 1"),
    )


def downgrade() -> None:
    op.drop_index("memories_user_external_id_idx", table_name="memories")
    op.drop_column("memories", "external_id")
