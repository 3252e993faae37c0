"""Erase tombstones: user_erasures, the window after an erase in which writes are refused.

Revision ID: 0011_erase_tombstones
Revises: 0010_memory_context
Create Date: 2026-12-01 06:20:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import UUID

revision: str = "0011_erase_tombstones"
down_revision: str | None = "0010_memory_context"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Per tenant, like every row the service keeps (0007_tenants): one tenant's erase of
    # "alice" neither blocks nor reveals itself to another tenant's "alice".
    op.create_table(
        "user_erasures",
        sa.Column(
            "tenant_id",
            UUID(as_uuid=True),
            nullable=False,
            server_default=sa.text("cognis_tenant()"),
        ),
        sa.Column("user_id", sa.Text(), nullable=False),
        sa.Column("erased_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("writes_refused_until", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "user_id", name="user_erasures_pkey"),
    )
    op.execute("ALTER TABLE user_erasures ENABLE ROW LEVEL SECURITY")
    op.execute("ALTER TABLE user_erasures FORCE ROW LEVEL SECURITY")
    op.execute(
        "CREATE POLICY user_erasures_tenant_isolation ON user_erasures "
        "USING (tenant_id = cognis_tenant()) WITH CHECK (tenant_id = cognis_tenant())"
    )
    op.execute(
        "CREATE POLICY user_erasures_background_claims ON user_erasures TO cognis_background "
        "USING (cognis_tenant() IS NULL) WITH CHECK (cognis_tenant() IS NULL)"
    )
    op.execute("GRANT SELECT, INSERT, UPDATE, DELETE ON user_erasures TO cognis_rw")


def downgrade() -> None:
    # Tombstones live for a minute (COGNIS_ERASE_WRITE_BLOCK_S): dropping them loses nothing
    # that outlives the erase's window.
    op.drop_table("user_erasures")
