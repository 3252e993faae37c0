"""Analyst views and functions from sql/analyst_views_v1.sql.

Revision ID: 0002_analyst_views
Revises: 0001_initial_schema
Create Date: 2026-11-29 23:01:00
"""

from collections.abc import Sequence
from pathlib import Path

from alembic import op

from app.db.sqlscript import split_statements

revision: str = "0002_analyst_views"
down_revision: str | None = "0001_initial_schema"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SQL_DIR = Path(__file__).resolve().parents[2] / "sql"


def _run_script(name: str) -> None:
    for statement in split_statements((SQL_DIR / name).read_text()):
        op.execute(statement)


def upgrade() -> None:
    _run_script("analyst_views_v1.sql")


def downgrade() -> None:
    _run_script("analyst_views_v1_drop.sql")
