"""Batch jobs: the table `batch_jobs` (sql/batch_jobs_v1.sql).

A batch create whose memories need more model time than the request's deadline is answered
202 with a job instead of being refused: the validated batch is kept in this table, in the
request's transaction, and a worker writes its memories later (app/memories/batch_jobs.py).
A new table only: no lock on an existing one, nothing rewritten. Rerunnable: the SQL file uses
IF NOT EXISTS and DROP ... IF EXISTS.

Revision ID: 0022_batch_jobs
Revises: 0021_sentence_vectors
Create Date: 2026-12-03 17:00:00
"""

from collections.abc import Sequence

from app.db.migration_safety import refuse_data_loss
from app.db.sqlscript import run_sql_file

revision: str = "0022_batch_jobs"
down_revision: str | None = "0021_sentence_vectors"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    run_sql_file("batch_jobs_v1.sql")


def downgrade() -> None:
    # A queued job is a write the service accepted (202) and has not done yet.
    refuse_data_loss(
        "the batch creates accepted and not yet written, and the record of those done (batch_jobs)",
        (
            ("batch_jobs not done", "SELECT count(*) FROM batch_jobs WHERE status <> 'done'"),
            ("batch_jobs", "SELECT count(*) FROM batch_jobs"),
        ),
    )
    run_sql_file("batch_jobs_v1_drop.sql")
