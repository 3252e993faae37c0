"""Idempotency keys: the response each write sent with an Idempotency-Key got, replayed to a
retry with the same key (app/idempotency).

Per tenant and user, like every row the service keeps (0007_tenants): row-level security
confines the API's role to its tenant; the relay's role (cognis_background, no tenant set)
purges expired rows of every tenant. A new, empty table: no CONCURRENTLY needed.

Revision ID: 0014_idempotency_keys
Revises: 0013_outbox_user_delivered
Create Date: 2026-12-01 09:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import UUID

revision: str = "0014_idempotency_keys"
down_revision: str | None = "0013_outbox_user_delivered"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "idempotency_keys",
        sa.Column(
            "tenant_id",
            UUID(as_uuid=True),
            nullable=False,
            server_default=sa.text("cognis_tenant()"),
        ),
        sa.Column("user_id", sa.Text(), nullable=False),
        sa.Column("key", sa.Text(), nullable=False),
        sa.Column("route", sa.Text(), nullable=False),
        sa.Column("request_hash", sa.LargeBinary(), nullable=False),
        sa.Column("state", sa.Text(), nullable=False),
        sa.Column("job_id", UUID(as_uuid=True), nullable=True),
        sa.Column("response_status", sa.SmallInteger(), nullable=True),
        sa.Column("response_body", sa.LargeBinary(), nullable=True),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "state IN ('running', 'done')", name=op.f("idempotency_keys_state_check")
        ),
        sa.CheckConstraint(
            "state = 'running' OR (response_status IS NOT NULL AND response_body IS NOT NULL)",
            name=op.f("idempotency_keys_done_has_response_check"),
        ),
        sa.PrimaryKeyConstraint("tenant_id", "user_id", "key", name=op.f("idempotency_keys_pkey")),
    )
    op.create_index(
        op.f("idempotency_keys_expires_at_idx"), "idempotency_keys", ["expires_at"], unique=False
    )
    op.execute("ALTER TABLE idempotency_keys ENABLE ROW LEVEL SECURITY")
    op.execute("ALTER TABLE idempotency_keys FORCE ROW LEVEL SECURITY")
    op.execute(
        "CREATE POLICY idempotency_keys_tenant_isolation ON idempotency_keys "
        "USING (tenant_id = cognis_tenant()) WITH CHECK (tenant_id = cognis_tenant())"
    )
    op.execute(
        "CREATE POLICY idempotency_keys_background_claims ON idempotency_keys "
        "TO cognis_background USING (cognis_tenant() IS NULL) "
        "WITH CHECK (cognis_tenant() IS NULL)"
    )
    op.execute("GRANT SELECT, INSERT, UPDATE, DELETE ON idempotency_keys TO cognis_rw")


def downgrade() -> None:
    # Stored responses live a day at most (COGNIS_IDEMPOTENCY_TTL_S) and hold nothing that is
    # not also in memories or messages: dropping them only means that a retry of a write made
    # before the downgrade is taken as a new request.
    op.drop_table("idempotency_keys")
