"""Traces across the queue (issue 44): ingest_tasks.traceparent.

When the API traces (OTEL_* variables, docs/observability/tracing.md), a `POST /messages`
stores the W3C traceparent of its request on each task it queues; the worker that takes the
task continues that trace, so the message's extraction and writes sit in the trace of the
request that sent it. NULL when the request was not traced (tracing off: the default).

A nullable column without a default: a catalog change, no rewrite, rerunnable (IF NOT EXISTS).
The downgrade drops it without refusing: only the link from old tasks to their traces goes.

Revision ID: 0035_task_traceparent
Revises: 0034_multilingual_vector
Create Date: 2026-12-04 16:00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0035_task_traceparent"
down_revision: str | None = "0034_multilingual_vector"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute("ALTER TABLE ingest_tasks ADD COLUMN IF NOT EXISTS traceparent text")
    op.execute(
        "COMMENT ON COLUMN ingest_tasks.traceparent IS 'The W3C traceparent of the request "
        "that queued the task, when tracing was on: the worker continues that trace. NULL: "
        "not traced.'"
    )


def downgrade() -> None:
    op.execute("ALTER TABLE ingest_tasks DROP COLUMN IF EXISTS traceparent")
