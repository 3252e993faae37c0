"""Erase tombstones: user_erasures, the window after an erase in which writes are refused.

Revision ID: 0011_erase_tombstones
Revises: 0006_memory_external_ids
Create Date: 2026-12-01 05:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011_erase_tombstones"
down_revision: str | None = "0006_memory_external_ids"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "user_erasures",
        sa.Column("user_id", sa.Text(), nullable=False),
        sa.Column("erased_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("writes_refused_until", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("user_id", name="user_erasures_pkey"),
    )


def downgrade() -> None:
    # Tombstones live for a minute (COGNIS_ERASE_WRITE_BLOCK_S): dropping them loses nothing
    # that outlives the erase's window.
    op.drop_table("user_erasures")
