"""Tenants: API keys per tenant, tenant_id on every row, row-level security on every table.

Existing rows join the default tenant (the keys of COGNIS_API_KEY_HASHES belong to it too).
The tenant of a transaction is `cognis.tenant_id`, set with set_config(..., true) by the
service; `cognis_tenant()` reads it (NULL when unset). New rows take it as their tenant_id, and
the policies show a role only its tenant's rows, so a query that forgets a WHERE still cannot
cross tenants. Roles (cluster-wide, created here when missing, never dropped by a downgrade):
- cognis_rw: DML on the service's tables; log in as a member of it to serve requests;
- cognis_background: also sees every tenant's rows while no tenant is set (the relay and the
  ingestion workers claim work across tenants, then set the tenant of what they handle).
The migrating role (the tables' owner) joins cognis_background, so a deployment with one
database URL keeps working; FORCE makes the policies bind the owner as well.

Revision ID: 0007_tenants
Revises: 0006_memory_external_ids
Create Date: 2026-12-01 05:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import UUID

from app.db.migration_safety import (
    create_index_concurrently,
    drop_index_concurrently,
    exists,
    refuse_data_loss,
)

revision: str = "0007_tenants"
down_revision: str | None = "0006_memory_external_ids"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

DEFAULT_TENANT_ID = "00000000-0000-0000-0000-000000000001"
# Parents first (a downgrade deletes in reverse).
TENANT_TABLES = ("messages", "memories", "outbox", "ingest_tasks", "ingest_decisions")
# Referencing tables before the tables they reference (see the LOCK TABLE in the upgrade).
LOCK_ORDER = ("memories", "ingest_decisions", "ingest_tasks", "outbox", "messages")
SERVICE_TABLES = (*TENANT_TABLES, "tenants", "api_keys")
SERVICE_SEQUENCES = ("outbox_id_seq", "ingest_decisions_id_seq")
# Unique per user before, unique per tenant and user now: (name, table, columns, where).
UNIQUE_PER_USER = (
    (
        "messages_user_idempotency_key_idx",
        "messages",
        ("user_id", "idempotency_key"),
        "idempotency_key IS NOT NULL",
    ),
    (
        "memories_user_external_id_idx",
        "memories",
        ("user_id", "external_id"),
        "external_id IS NOT NULL AND version = 1",
    ),
)

_CREATE_ROLE = """
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{role}') THEN
        CREATE ROLE {role} NOLOGIN;
    END IF;
EXCEPTION WHEN duplicate_object THEN NULL;  -- created meanwhile by another database's migration
END $$
"""
_JOIN_BACKGROUND = """
DO $$
BEGIN
    IF NOT pg_has_role(current_user, 'cognis_background', 'MEMBER') THEN
        GRANT cognis_background TO current_user;
    END IF;
EXCEPTION WHEN insufficient_privilege THEN
    RAISE WARNING 'cannot join cognis_background: background processes need a role in it';
END $$
"""


def upgrade() -> None:
    # Catalog changes only, in one transaction (every ADD COLUMN below is a stored "missing
    # value", no rewrite): all of it commits or none of it, so a rerun skips it once it has.
    if not exists("to_regclass('tenants') IS NOT NULL"):
        _tenant_columns_and_policies()
    # Then, outside that transaction, each unique index is rebuilt per tenant concurrently.
    for name, table, columns, where in UNIQUE_PER_USER:
        _unique_per_tenant(name, table, columns, where)


def _tenant_columns_and_policies() -> None:
    op.execute(
        """
        CREATE FUNCTION cognis_tenant() RETURNS uuid LANGUAGE sql STABLE PARALLEL SAFE
        AS $$ SELECT NULLIF(current_setting('cognis.tenant_id', true), '')::uuid $$
        """
    )
    for role in ("cognis_rw", "cognis_background"):
        op.execute(_CREATE_ROLE.format(role=role))
    op.execute("GRANT cognis_rw TO cognis_background")
    op.execute(_JOIN_BACKGROUND)

    op.create_table(
        "tenants",
        sa.Column("id", UUID(as_uuid=True), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.PrimaryKeyConstraint("id", name="tenants_pkey"),
        sa.UniqueConstraint("name", name="tenants_name_key"),
        sa.CheckConstraint("length(btrim(name)) > 0", name="tenants_name_not_blank_check"),
    )
    op.create_table(
        "api_keys",
        sa.Column("id", UUID(as_uuid=True), nullable=False),
        sa.Column("tenant_id", UUID(as_uuid=True), nullable=False),
        sa.Column("prefix", sa.Text(), nullable=False),
        sa.Column("key_hash", sa.Text(), nullable=False),
        sa.Column("name", sa.Text()),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.Column("last_used_at", sa.DateTime(timezone=True)),
        sa.Column("expires_at", sa.DateTime(timezone=True)),
        sa.Column("revoked_at", sa.DateTime(timezone=True)),
        sa.PrimaryKeyConstraint("id", name="api_keys_pkey"),
        sa.ForeignKeyConstraint(
            ["tenant_id"], ["tenants.id"], name="api_keys_tenant_id_fkey", ondelete="CASCADE"
        ),
        sa.UniqueConstraint("prefix", name="api_keys_prefix_key"),
    )
    op.create_index("api_keys_tenant_id_idx", "api_keys", ["tenant_id"])
    op.execute(f"INSERT INTO tenants (id, name) VALUES ('{DEFAULT_TENANT_ID}', 'default')")  # noqa: S608

    # The default is evaluated once here for the rows already present (a stored "missing
    # value": no table rewrite, whatever the size), and per insert afterwards.
    op.execute(f"SELECT set_config('cognis.tenant_id', '{DEFAULT_TENANT_ID}', true)")
    # All five at once, children before the parents they reference, as writers take them: an
    # insert holds its table and then checks its foreign keys in the parent. Taken parent
    # first, table by table, a memory insert under load deadlocked with this (bench.migrations).
    op.execute(f"LOCK TABLE {', '.join(LOCK_ORDER)} IN ACCESS EXCLUSIVE MODE")
    for table in TENANT_TABLES:
        op.execute(
            f"ALTER TABLE {table} ADD COLUMN tenant_id uuid NOT NULL DEFAULT cognis_tenant()"
        )
    op.execute("SELECT set_config('cognis.tenant_id', '', true)")

    for table in TENANT_TABLES:
        op.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
        op.execute(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY")
        op.execute(
            f"CREATE POLICY {table}_tenant_isolation ON {table} "
            "USING (tenant_id = cognis_tenant()) WITH CHECK (tenant_id = cognis_tenant())"
        )
        op.execute(
            f"CREATE POLICY {table}_background_claims ON {table} TO cognis_background "
            "USING (cognis_tenant() IS NULL) WITH CHECK (cognis_tenant() IS NULL)"
        )
    # Table by table, not ON ALL TABLES: the analyst views run as their owner and must not be
    # readable by the service's roles.
    op.execute("GRANT USAGE ON SCHEMA public TO cognis_rw")
    op.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON {', '.join(SERVICE_TABLES)} TO cognis_rw")
    op.execute(f"GRANT USAGE, SELECT ON SEQUENCE {', '.join(SERVICE_SEQUENCES)} TO cognis_rw")


def _unique_per_tenant(name: str, table: str, columns: tuple[str, ...], where: str) -> None:
    """Build the per-tenant index under a new name, drop the per-user one, rename: each step a
    statement of its own that blocks no reads or writes (until 2026-12 this revision dropped
    and rebuilt the index inside the transaction that held ACCESS EXCLUSIVE on five tables).
    Each step is safe to repeat, so a rerun resumes wherever an interruption left it."""
    if exists(  # done: the index of that name is already per tenant
        f"(SELECT indexdef LIKE '%(tenant_id, %' FROM pg_indexes WHERE indexname = '{name}')"  # noqa: S608
    ):
        return
    building = f"{name}_tenant"
    create_index_concurrently(
        building, table, f"({', '.join(('tenant_id', *columns))}) WHERE {where}", unique=True
    )
    drop_index_concurrently(name)
    with op.get_context().autocommit_block():
        op.execute(f"ALTER INDEX IF EXISTS {building} RENAME TO {name}")


def downgrade() -> None:
    refuse_data_loss("every tenant's rows but the default tenant's, and all tenants and API keys")
    op.execute(f"REVOKE ALL ON {', '.join(SERVICE_TABLES)} FROM cognis_rw")
    op.execute(f"REVOKE ALL ON SEQUENCE {', '.join(SERVICE_SEQUENCES)} FROM cognis_rw")
    for table in TENANT_TABLES:
        op.execute(f"DROP POLICY {table}_background_claims ON {table}")
        op.execute(f"DROP POLICY {table}_tenant_isolation ON {table}")
        op.execute(f"ALTER TABLE {table} NO FORCE ROW LEVEL SECURITY")
        op.execute(f"ALTER TABLE {table} DISABLE ROW LEVEL SECURITY")
    # The old schema cannot hold tenants apart: only the default tenant's rows go back with
    # it; the other tenants' rows are deleted (children first). Their OpenSearch documents
    # stay until `python -m app reindex --recreate`.
    for table in reversed(TENANT_TABLES):
        op.execute(f"DELETE FROM {table} WHERE tenant_id <> '{DEFAULT_TENANT_ID}'")  # noqa: S608
    for name, table, columns, where in UNIQUE_PER_USER:
        op.drop_index(name, table_name=table)
        op.create_index(name, table, list(columns), unique=True, postgresql_where=sa.text(where))
    for table in TENANT_TABLES:
        op.drop_column(table, "tenant_id")
    op.drop_table("api_keys")
    op.drop_table("tenants")
    op.execute("DROP FUNCTION cognis_tenant()")
