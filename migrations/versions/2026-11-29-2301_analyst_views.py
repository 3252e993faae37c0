"""Analyst views and functions from sql/analyst_views_v1.sql.

Revision ID: 0002_analyst_views
Revises: 0001_initial_schema
Create Date: 2026-11-29 23:01:00
"""

from collections.abc import Sequence

from app.db.sqlscript import run_sql_file

revision: str = "0002_analyst_views"
down_revision: str | None = "0001_initial_schema"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    run_sql_file("analyst_views_v1.sql")


def downgrade() -> None:
    run_sql_file("analyst_views_v1_drop.sql")
