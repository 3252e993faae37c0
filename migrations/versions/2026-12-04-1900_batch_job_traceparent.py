"""Batch jobs keep their trace (issue 44): batch_jobs.traceparent.

When the API traces (OTEL_* variables, docs/observability/tracing.md), a batch create answered
202 stores the W3C traceparent of its request on the job it queues; the worker that takes the
job continues that trace, so the job's embedding and its write sit in the trace of the
request that sent the batch, as an ingestion task's do (0035_task_traceparent). NULL when the
request was not traced (tracing off: the default).

A nullable column without a default: a catalog change, no rewrite, rerunnable (IF NOT EXISTS).
The downgrade drops it without refusing: only the link from queued jobs to their traces goes.

Revision ID: 0038_batch_job_traceparent
Revises: 0037_tenant_indexes
Create Date: 2026-12-04 19:00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0038_batch_job_traceparent"
down_revision: str | None = "0037_tenant_indexes"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute("ALTER TABLE batch_jobs ADD COLUMN IF NOT EXISTS traceparent text")
    op.execute(
        "COMMENT ON COLUMN batch_jobs.traceparent IS 'The W3C traceparent of the request that "
        "queued the job, when tracing was on: the worker continues that trace. NULL: not "
        "traced.'"
    )


def downgrade() -> None:
    op.execute("ALTER TABLE batch_jobs DROP COLUMN IF EXISTS traceparent")
