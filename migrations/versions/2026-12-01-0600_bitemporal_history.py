"""Bi-temporal history for analysts: memories_known_at (transaction time) and memories_true_at
(event time), from sql/bitemporal_v1.sql. Functions only: the downgrade drops no data.

Revision ID: 0009_bitemporal_history
Revises: 0007_tenants
Create Date: 2026-12-01 06:00:00
"""

from collections.abc import Sequence

from app.db.sqlscript import run_sql_file

revision: str = "0009_bitemporal_history"
down_revision: str | None = "0007_tenants"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    run_sql_file("bitemporal_v1.sql")


def downgrade() -> None:
    run_sql_file("bitemporal_v1_drop.sql")
