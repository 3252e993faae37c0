"""Indexes that lead with tenant_id (issue 42): an analyst's row-level security policy keeps
`tenant_id = (SELECT cognis_analyst_tenant())`, an InitPlan since 0023_path_proof, which can
be an index condition; an index that leads with tenant_id lets a query over the analyst's
whole tenant (a count, per day, per category, deleted last week) read that tenant's entries
only, where it read every tenant's rows. (tenant_id, user_id, created_at), not (tenant_id,
created_at): the planner estimates `tenant_id = <InitPlan>` at 1/(number of tenants) of the
rows, whoever the analyst is, and with (tenant_id, created_at) it ANDed that index with the
user's for a query of one user, which for an analyst of a big tenant read most of it (1.4 ms
became 37 ms); with user_id second one index answers both conditions. On memories and
ingest_decisions, the two tables docs/analysts.md reads across users. Measured by
`make bench-analyst` (docs/benchmarks/analysts.md).

Also `ingest_tasks` gets fillfactor 80: of a task's updates only the heartbeat's lease
renewals and the move of a user's next task to the back can be HOT (the claim and the finish
change `state`, a partial index's predicate column), and in a replay of the worker's updates
(`make bench-task-fillfactor`, docs/operations.md, "How the tables age") 90 % of those were
HOT at the default 100, 94 % at 90 and 99 % at 80, the table no bigger after the run. A storage parameter takes SHARE
UPDATE EXCLUSIVE (reads and writes go on), applies to pages filled from then on, and setting
it again is harmless.

Built CONCURRENTLY, outside a transaction: writes go on while they build; an interrupted
build's INVALID index is dropped and built again on a rerun (app.db.migration_safety).

Revision ID: 0037_tenant_indexes
Revises: 0036_webhook_dispatch
Create Date: 2026-12-04 18:00:00
"""

from collections.abc import Sequence

from alembic import op

from app.db.migration_safety import create_index_concurrently, drop_index_concurrently

revision: str = "0037_tenant_indexes"
down_revision: str | None = "0036_webhook_dispatch"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

INDEXES = {
    "memories_tenant_id_user_id_created_at_idx": ("memories", "(tenant_id, user_id, created_at)"),
    "ingest_decisions_tenant_id_user_id_created_at_idx": (
        "ingest_decisions",
        "(tenant_id, user_id, created_at)",
    ),
}


def upgrade() -> None:
    op.execute("ALTER TABLE ingest_tasks SET (fillfactor = 80)")
    for name, (table, definition) in INDEXES.items():
        create_index_concurrently(name, table, definition)


def downgrade() -> None:
    for name in INDEXES:
        drop_index_concurrently(name)
    op.execute("ALTER TABLE ingest_tasks RESET (fillfactor)")
