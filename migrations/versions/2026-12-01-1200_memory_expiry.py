"""Expiry: memories.expires_at, the reaper's index and audit table, and its outbox event.

An expired memory is hidden by every read at once (app/memories/expiry.py) and removed, every
version of it, by the reaper, which leaves a memory_expiries row (no content, like an erase)
and queues one `delete_document` outbox event per version (sql/memory_expiry_v1.sql).

Follows 0016_reader_roles. The column is nullable without a default (a catalog change, no
rewrite); the outbox's op check is replaced NOT VALID and validated in a transaction of its
own; the reaper's partial index is built concurrently. Rerunnable: IF NOT EXISTS, DROP ... IF
EXISTS, and create_index_concurrently's INVALID-index rebuild.

Revision ID: 0017_memory_expiry
Revises: 0016_reader_roles
Create Date: 2026-12-01 12:00:00
"""

from collections.abc import Sequence

from alembic import op

from app.db.migration_safety import (
    create_index_concurrently,
    drop_index_concurrently,
    refuse_data_loss,
    validate_constraint,
)
from app.db.sqlscript import run_sql_file

revision: str = "0017_memory_expiry"
down_revision: str | None = "0016_reader_roles"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OPS_BEFORE = "op IN ('index', 'erase_user')"
OPS_AFTER = "op IN ('index', 'erase_user', 'delete_document')"


def _replace_op_check(condition: str) -> None:
    op.execute("ALTER TABLE outbox DROP CONSTRAINT IF EXISTS outbox_op_check")
    op.execute(f"ALTER TABLE outbox ADD CONSTRAINT outbox_op_check CHECK ({condition}) NOT VALID")


def upgrade() -> None:
    op.execute("ALTER TABLE memories ADD COLUMN IF NOT EXISTS expires_at timestamptz")
    _replace_op_check(OPS_AFTER)
    run_sql_file("memory_expiry_v1.sql")
    validate_constraint("outbox", "outbox_op_check")
    create_index_concurrently(
        "memories_expires_at_idx", "memories", "(expires_at) WHERE expires_at IS NOT NULL"
    )


def downgrade() -> None:
    refuse_data_loss(
        "the memories' expiry times (memories.expires_at), the reaper's audit rows "
        "(memory_expiries) and its undelivered document deletions",
        (
            (
                "memories with an expiry",
                "SELECT count(*) FROM memories WHERE expires_at IS NOT NULL",
            ),
            ("memory_expiries", "SELECT count(*) FROM memory_expiries"),
            (
                "undelivered document deletions",
                "SELECT count(*) FROM outbox WHERE op = 'delete_document' AND processed_at IS NULL",
            ),
        ),
    )
    drop_index_concurrently("memories_expires_at_idx")
    op.execute("DELETE FROM outbox WHERE op = 'delete_document'")
    _replace_op_check(OPS_BEFORE)
    run_sql_file("memory_expiry_v1_drop.sql")
    op.execute("ALTER TABLE memories DROP COLUMN IF EXISTS expires_at")
    validate_constraint("outbox", "outbox_op_check")
