"""Outbox: partial index on one user's pending rows (index lag, read-your-writes waits).

Revision ID: 0004_outbox_user_pending
Revises: 0003_ingestion
Create Date: 2026-12-01 02:30:00
"""

from collections.abc import Sequence

from alembic import op

from app.db.migration_safety import create_index_concurrently

revision: str = "0004_outbox_user_pending"
down_revision: str | None = "0003_ingestion"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # CONCURRENTLY: the outbox takes writes all the time; a plain CREATE INDEX would block
    # every memory write for as long as the build runs. It cannot run inside a transaction.
    # A rerun after an interrupted build drops the INVALID index it left and builds it again.
    create_index_concurrently(
        "outbox_user_pending_idx", "outbox", "(user_id, id) WHERE processed_at IS NULL"
    )


def downgrade() -> None:
    with op.get_context().autocommit_block():
        op.execute("DROP INDEX CONCURRENTLY IF EXISTS outbox_user_pending_idx")
