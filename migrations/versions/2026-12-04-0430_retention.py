"""Retention (issue 42): indexes that find the rows the retention job deletes, and autovacuum
settings for the tables that churn.

The retention job (app/db/retention.py) deletes in batches, each walking an index from its
oldest entry: delivered outbox events by delivery time, finished ingestion tasks and batch jobs
by the time they finished. Each index is partial, on the rows that can become due only, so the
pending work (what the relay and the workers scan) never enters it. Expired idempotency keys
have their index since 0014 (`idempotency_keys_expires_at_idx`). Built CONCURRENTLY, outside
a transaction: writes go on while they build; an interrupted build's INVALID index is dropped
and built again on a rerun (app.db.migration_safety).

`memories`, `outbox` and `ingest_tasks` leave a dead row behind nearly every update (none of
their hot updates can be HOT: docs/operations.md, "How the tables age"), so autovacuum visits
them after 5% of their rows are dead instead of 20%, and analyzes after 2% instead of 10%, as
the Aurora parameter group does for every table. A storage parameter takes SHARE UPDATE
EXCLUSIVE, which blocks neither reads nor writes, and setting it again is harmless.

Revision ID: 0026_retention
Revises: 0025_current_hnsw
Create Date: 2026-12-04 04:30:00
"""

from collections.abc import Sequence

from alembic import op

from app.db.migration_safety import create_index_concurrently, drop_index_concurrently

revision: str = "0026_retention"
down_revision: str | None = "0025_current_hnsw"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

INDEXES = {
    "outbox_delivered_idx": ("outbox", "(processed_at) WHERE processed_at IS NOT NULL"),
    "ingest_tasks_finished_idx": (
        "ingest_tasks",
        "(finished_at) WHERE state IN ('done', 'failed')",
    ),
    "batch_jobs_finished_idx": ("batch_jobs", "(finished_at) WHERE status IN ('done', 'failed')"),
}
CHURNING_TABLES = ("memories", "outbox", "ingest_tasks")
AUTOVACUUM = "autovacuum_vacuum_scale_factor = 0.05, autovacuum_analyze_scale_factor = 0.02"


def upgrade() -> None:
    for table in CHURNING_TABLES:
        op.execute(f"ALTER TABLE {table} SET ({AUTOVACUUM})")
    for name, (table, definition) in INDEXES.items():
        create_index_concurrently(name, table, definition)


def downgrade() -> None:
    for name in INDEXES:
        drop_index_concurrently(name)
    for table in CHURNING_TABLES:
        op.execute(
            f"ALTER TABLE {table} RESET "
            "(autovacuum_vacuum_scale_factor, autovacuum_analyze_scale_factor)"
        )
