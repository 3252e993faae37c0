"""Webhook dispatch (issue 44): a NOTIFY that wakes the dispatcher, and the index that finds
delivered rows for the retention job.

A statement that queues webhook deliveries notifies `cognis_webhooks` when it wrote any row
(the fan-out runs with every memory change and writes none for a tenant without
subscriptions: no NOTIFY then), so the dispatcher beside the relay sends an event as soon as
its transaction commits instead of at its next poll. The retention job (app/db/retention.py)
deletes delivered deliveries COGNIS_WEBHOOK_RETENTION_DAYS after delivery, walking
`webhook_deliveries_delivered_idx` from its oldest entry; partial, so pending and dead rows
never enter it. Built CONCURRENTLY, outside a transaction (an interrupted build's INVALID
index is dropped and built again on a rerun); the function and trigger are replaced on a
rerun.

Revision ID: 0036_webhook_dispatch
Revises: 0035_task_traceparent
Create Date: 2026-12-04 17:00:00
"""

from collections.abc import Sequence

from alembic import op

from app.db.migration_safety import create_index_concurrently, drop_index_concurrently

revision: str = "0036_webhook_dispatch"
down_revision: str | None = "0035_task_traceparent"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute(
        """
        CREATE OR REPLACE FUNCTION public.webhook_deliveries_notify() RETURNS trigger
        LANGUAGE plpgsql SET search_path = pg_catalog, public, pg_temp AS $$
        BEGIN
            IF EXISTS (SELECT 1 FROM queued) THEN
                PERFORM pg_notify('cognis_webhooks', '');
            END IF;
            RETURN NULL;
        END $$
        """
    )
    op.execute("DROP TRIGGER IF EXISTS webhook_deliveries_notify_trigger ON webhook_deliveries")
    op.execute(
        "CREATE TRIGGER webhook_deliveries_notify_trigger AFTER INSERT ON webhook_deliveries "
        "REFERENCING NEW TABLE AS queued "
        "FOR EACH STATEMENT EXECUTE FUNCTION webhook_deliveries_notify()"
    )
    op.execute(
        "COMMENT ON FUNCTION webhook_deliveries_notify() IS "
        "'Wakes the webhook dispatcher (LISTEN cognis_webhooks) when a statement queued "
        "deliveries.'"
    )
    create_index_concurrently(
        "webhook_deliveries_delivered_idx",
        "webhook_deliveries",
        "(delivered_at) WHERE status = 'delivered'",
    )


def downgrade() -> None:
    drop_index_concurrently("webhook_deliveries_delivered_idx")
    op.execute("DROP TRIGGER IF EXISTS webhook_deliveries_notify_trigger ON webhook_deliveries")
    op.execute("DROP FUNCTION IF EXISTS webhook_deliveries_notify()")
