"""Webhooks (issue 44): per-tenant subscriptions, their queued deliveries and the attempt log.

`webhook_subscriptions` holds a tenant's receivers: URL, the signing secret (readable by the
service, which signs with it: a leak of this table reveals the secrets, see docs/webhooks.md),
the event types wanted and an active flag. `webhook_deliveries` holds one row per event and
subscription, written in the transaction of the memory change it reports (app/webhooks/
events.py) and claimed by the dispatcher (app/webhooks/delivery.py) in order per subscription
and user. `webhook_attempts` logs every POST: status code, error, duration. All three carry
tenant_id under row-level security like every tenant table (0007_tenants); the service's
roles read and write them (cognis_rw), the background role claims across tenants.

New, empty tables: one transaction, rerunnable (IF NOT EXISTS; policies dropped first).
Going down drops subscriptions and queued events: refused unless forced when any exist.

Revision ID: 0033_webhooks
Revises: 0029_memory_ids
Create Date: 2026-12-04 13:30:00
"""

from collections.abc import Sequence

from alembic import op

from app.db.migration_safety import refuse_data_loss

revision: str = "0033_webhooks"
down_revision: str | None = "0029_memory_ids"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = ("webhook_subscriptions", "webhook_deliveries", "webhook_attempts")

COMMENTS = {
    "webhook_subscriptions": {
        None: "A tenant's webhook receivers (issue 44): where events are POSTed, signed with "
        "the secret.",
        "tenant_id": "The tenant whose events the subscription receives (row-level security).",
        "id": "The subscription's id, as the API shows it.",
        "url": "The receiver's URL (http or https), checked against private addresses at "
        "creation unless COGNIS_WEBHOOK_ALLOW_PRIVATE.",
        "secret": "The signing secret (whsec_ and base64 of 32 random bytes), shown once at "
        "creation; the service reads it to sign each delivery.",
        "event_types": "The event types delivered, e.g. memory.created, memory.updated, "
        "memory.deleted.",
        "active": "False: no new event is queued for this subscription.",
        "created_at": "When the subscription was created.",
    },
    "webhook_deliveries": {
        None: "One event queued for one subscription, written in the transaction of the change "
        "it reports; delivered in order per subscription and user.",
        "tenant_id": "The tenant of the event (row-level security).",
        "id": "Monotonic id: the order of delivery per subscription and user.",
        "subscription_id": "The subscription the event goes to.",
        "event_id": "The event's id (webhook-id header): the receiver's de-duplication key.",
        "user_id": "The user whose memory changed; erasing the user deletes the row.",
        "type": "The event type, e.g. memory.created.",
        "payload": "The event's data: ids and the memory's fields at the change.",
        "status": "pending (queued or retrying), delivered, or dead (attempts exhausted).",
        "attempts": "POSTs made so far.",
        "next_attempt_at": "When a pending delivery is due (backoff after a failure).",
        "created_at": "When the change was committed (the transaction's time).",
        "delivered_at": "When a receiver answered 2xx.",
    },
    "webhook_attempts": {
        None: "Every POST of a delivery: the delivery log of a subscription.",
        "tenant_id": "The tenant of the delivery (row-level security).",
        "id": "The attempt's id.",
        "delivery_id": "The delivery attempted.",
        "attempted_at": "When the POST started.",
        "status_code": "The receiver's HTTP status; null when no answer came.",
        "error": "Why the attempt failed (status, timeout, connection error); null on success.",
        "duration_ms": "How long the POST took, in milliseconds.",
    },
}


def _quoted(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE IF NOT EXISTS webhook_subscriptions (
            tenant_id uuid NOT NULL DEFAULT cognis_tenant(),
            id uuid NOT NULL DEFAULT gen_random_uuid(),
            url text NOT NULL,
            secret text NOT NULL,
            event_types text[] NOT NULL,
            active boolean NOT NULL DEFAULT true,
            created_at timestamptz NOT NULL DEFAULT now(),
            CONSTRAINT webhook_subscriptions_pkey PRIMARY KEY (id)
        )
        """
    )
    op.execute(
        "CREATE INDEX IF NOT EXISTS webhook_subscriptions_tenant_id_idx "
        "ON webhook_subscriptions (tenant_id)"
    )
    op.execute(
        """
        CREATE TABLE IF NOT EXISTS webhook_deliveries (
            tenant_id uuid NOT NULL DEFAULT cognis_tenant(),
            id bigint GENERATED ALWAYS AS IDENTITY,
            subscription_id uuid NOT NULL,
            event_id uuid NOT NULL,
            user_id text NOT NULL,
            type text NOT NULL,
            payload jsonb NOT NULL,
            status text NOT NULL DEFAULT 'pending',
            attempts integer NOT NULL DEFAULT 0,
            next_attempt_at timestamptz NOT NULL DEFAULT now(),
            created_at timestamptz NOT NULL DEFAULT now(),
            delivered_at timestamptz,
            CONSTRAINT webhook_deliveries_pkey PRIMARY KEY (id),
            CONSTRAINT webhook_deliveries_subscription_id_fkey FOREIGN KEY (subscription_id)
                REFERENCES webhook_subscriptions (id) ON DELETE CASCADE,
            CONSTRAINT webhook_deliveries_status_check
                CHECK (status IN ('pending', 'delivered', 'dead'))
        )
        """
    )
    op.execute(
        "CREATE INDEX IF NOT EXISTS webhook_deliveries_pending_idx ON webhook_deliveries "
        "(subscription_id, user_id, id) WHERE status = 'pending'"
    )
    op.execute(
        "CREATE INDEX IF NOT EXISTS webhook_deliveries_subscription_id_id_idx "
        "ON webhook_deliveries (subscription_id, id)"
    )
    op.execute(
        "CREATE INDEX IF NOT EXISTS webhook_deliveries_user_id_idx ON webhook_deliveries (user_id)"
    )
    op.execute(
        """
        CREATE TABLE IF NOT EXISTS webhook_attempts (
            tenant_id uuid NOT NULL DEFAULT cognis_tenant(),
            id bigint GENERATED ALWAYS AS IDENTITY,
            delivery_id bigint NOT NULL,
            attempted_at timestamptz NOT NULL DEFAULT now(),
            status_code integer,
            error text,
            duration_ms integer NOT NULL,
            CONSTRAINT webhook_attempts_pkey PRIMARY KEY (id),
            CONSTRAINT webhook_attempts_delivery_id_fkey FOREIGN KEY (delivery_id)
                REFERENCES webhook_deliveries (id) ON DELETE CASCADE
        )
        """
    )
    op.execute(
        "CREATE INDEX IF NOT EXISTS webhook_attempts_delivery_id_idx "
        "ON webhook_attempts (delivery_id)"
    )
    for table in TABLES:
        op.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
        op.execute(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY")
        op.execute(f"DROP POLICY IF EXISTS {table}_tenant_isolation ON {table}")
        op.execute(
            f"CREATE POLICY {table}_tenant_isolation ON {table} "
            "USING (tenant_id = cognis_tenant()) WITH CHECK (tenant_id = cognis_tenant())"
        )
        op.execute(f"DROP POLICY IF EXISTS {table}_background_claims ON {table}")
        op.execute(
            f"CREATE POLICY {table}_background_claims ON {table} TO cognis_background "
            "USING (cognis_tenant() IS NULL) WITH CHECK (cognis_tenant() IS NULL)"
        )
        op.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON {table} TO cognis_rw")
        for column, comment in COMMENTS[table].items():
            target = f"TABLE {table}" if column is None else f"COLUMN {table}.{column}"
            op.execute(f"COMMENT ON {target} IS {_quoted(comment)}")


def downgrade() -> None:
    refuse_data_loss(
        "the webhook subscriptions and their queued and logged deliveries",
        (
            ("webhook subscriptions", "SELECT count(*) FROM webhook_subscriptions"),
            ("webhook deliveries", "SELECT count(*) FROM webhook_deliveries"),
        ),
    )
    for table in reversed(TABLES):
        op.execute(f"DROP TABLE IF EXISTS {table}")
