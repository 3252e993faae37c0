"""Scoped erases: the audit table `scope_erasures` (sql/scope_erasures_v1.sql).

An erase of one agent's and/or one run's memories and messages of a user removes them from
both stores and leaves one row here (ids, counts, a time; no content), as the reaper leaves
`memory_expiries` rows. A new table only: no lock on an existing one, nothing rewritten.
Rerunnable: the SQL file uses IF NOT EXISTS and DROP ... IF EXISTS.

Revision ID: 0019_scope_erasures
Revises: 0018_agents_runs
Create Date: 2026-12-02 09:00:00
"""

from collections.abc import Sequence

from app.db.migration_safety import refuse_data_loss
from app.db.sqlscript import run_sql_file

revision: str = "0019_scope_erasures"
down_revision: str | None = "0018_agents_runs"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    run_sql_file("scope_erasures_v1.sql")


def downgrade() -> None:
    refuse_data_loss(
        "the audit rows of scoped erases (scope_erasures)",
        (("scope_erasures", "SELECT count(*) FROM scope_erasures"),),
    )
    run_sql_file("scope_erasures_v1_drop.sql")
