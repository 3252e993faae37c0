"""Roles for readers, and the end of a fact in the world (memories.event_end): cognis_analyst (read-only, bound to one tenant) and cognis_auditor
(read-only, every tenant, only when granted); the analysts' views run as their caller and
carry tenant_id; every table, column, view and function analysts read has a COMMENT.

Follows 0015_frozen_sql. New definitions only, in new files (the released ones stay as
released): sql/reader_roles_v1.sql, sql/analyst_views_v2.sql, sql/bitemporal_v3.sql (whose
memories_known_at no longer calls memories_as_of) and sql/table_comments_v1.sql. Every
statement is a catalog change (no table is scanned or rewritten) and the files are written to
be rerun (IF NOT EXISTS, CREATE OR REPLACE, DROP ... IF EXISTS).

Revision ID: 0016_reader_roles
Revises: 0015_frozen_sql
Create Date: 2026-12-01 11:00:00
"""

from collections.abc import Sequence

from alembic import op

from app.db.migration_safety import refuse_data_loss
from app.db.sqlscript import run_sql_file

revision: str = "0016_reader_roles"
down_revision: str | None = "0015_frozen_sql"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # When the fact ended in the world (PATCH or DELETE with event_end). A nullable column
    # without a default: a catalog change, no rewrite.
    op.execute("ALTER TABLE memories ADD COLUMN IF NOT EXISTS event_end timestamptz")
    run_sql_file("reader_roles_v1.sql")
    run_sql_file("analyst_views_v2.sql")
    run_sql_file("bitemporal_v3.sql")
    run_sql_file("table_comments_v1.sql")


def downgrade() -> None:
    refuse_data_loss(
        "the analyst login roles' tenant bindings (analyst_tenants) and the facts' ends in "
        "the world (memories.event_end)",
        (
            ("analyst_tenants", "SELECT count(*) FROM analyst_tenants"),
            (
                "memories with an event end",
                "SELECT count(*) FROM memories WHERE event_end IS NOT NULL",
            ),
        ),
    )
    # The views lose a column: CREATE OR REPLACE cannot, so they are made again as released.
    run_sql_file("analyst_views_v2_drop.sql")
    run_sql_file("analyst_views_v1.sql")
    run_sql_file("bitemporal_v2.sql")
    run_sql_file("reader_roles_v1_drop.sql")
    op.execute("ALTER TABLE memories DROP COLUMN IF EXISTS event_end")
    # Comments are left: they describe, and change nothing a query returns.
