"""Frozen SQL: memories_known_at's second definition (sql/bitemporal_v2.sql), which reads
memories_as_of. It was first edited into sql/bitemporal_v1.sql after 0009 was released, so a
database upgraded before the edit kept the old body and one created after got the new one;
bitemporal_v1.sql is back to its released text and this revision brings both to the same.

Released files in sql/ never change (tests/test_frozen_sql.py); a new definition is a new file
and a new revision. Functions only: the downgrade drops no data.

Revision ID: 0015_frozen_sql
Revises: 0014_idempotency_keys
Create Date: 2026-12-01 10:00:00
"""

from collections.abc import Sequence

from app.db.sqlscript import run_sql_file

revision: str = "0015_frozen_sql"
down_revision: str | None = "0014_idempotency_keys"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    run_sql_file("bitemporal_v2.sql")


def downgrade() -> None:
    # CREATE OR REPLACE of both released functions: memories_known_at as 0009 defined it.
    run_sql_file("bitemporal_v1.sql")
