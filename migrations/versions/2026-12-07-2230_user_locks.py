"""User locks as rows (issue 54): the per-user serialisation moves from advisory locks to row
locks on `user_locks`, one row per tenant and user.

Any role that can connect may take any advisory lock, and PostgreSQL lets only a superuser
revoke EXECUTE on pg_advisory_lock and its variants (the functions belong to the bootstrap
superuser; a migrating owner's REVOKE is a no-op warning). A read-only analyst could therefore
hold the ingestion worker's key of a user and stall ingestion. A row lock (SELECT ... FOR
UPDATE and its weaker modes) needs UPDATE on the table, which only the service's roles have:
nobody else can take, nor wait on, a user's lock. Writers take the row FOR KEY SHARE, an erase
FOR UPDATE, the ingestion worker FOR NO KEY UPDATE (app/memories/user_lock.py).

Row-level security as on every tenant table (the tenant's own rows, the background role
across tenants); no grant to cognis_analyst or cognis_auditor: the table says nothing the
memories do not. A new empty table: no rewrite, rows made on a user's first lock. Rerunnable
(IF NOT EXISTS; policies dropped first); the downgrade drops it (the locks it holds are
transaction-scoped, nothing is lost).

Revision ID: 0041_user_locks
Revises: 0040_lookup_indexes
Create Date: 2026-12-07 22:30:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0041_user_locks"
down_revision: str | None = "0040_lookup_indexes"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

COMMENTS = {
    None: "One row per tenant and user, locked (never changed) to serialise the user's "
    "writes: FOR KEY SHARE by a write, FOR UPDATE by an erase, FOR NO KEY UPDATE by the "
    "ingestion worker. Made on a user's first write.",
    "tenant_id": "The tenant the row belongs to (tenants.id).",
    "user_id": "The user whose writes the row's lock serialises.",
}
POLICIES = {
    "tenant_isolation": "USING (tenant_id = cognis_tenant()) "
    "WITH CHECK (tenant_id = cognis_tenant())",
    "background_claims": "TO cognis_background USING (cognis_tenant() IS NULL) "
    "WITH CHECK (cognis_tenant() IS NULL)",
}


def _quoted(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE IF NOT EXISTS user_locks (
            tenant_id uuid NOT NULL DEFAULT cognis_tenant(),
            user_id text NOT NULL,
            CONSTRAINT user_locks_pkey PRIMARY KEY (tenant_id, user_id)
        )
        """
    )
    op.execute("ALTER TABLE user_locks ENABLE ROW LEVEL SECURITY")
    op.execute("ALTER TABLE user_locks FORCE ROW LEVEL SECURITY")
    for name, rule in POLICIES.items():
        op.execute(f"DROP POLICY IF EXISTS user_locks_{name} ON user_locks")
        op.execute(f"CREATE POLICY user_locks_{name} ON user_locks {rule}")
    op.execute("GRANT SELECT, INSERT, UPDATE, DELETE ON user_locks TO cognis_rw")
    for column, comment in COMMENTS.items():
        target = "TABLE user_locks" if column is None else f"COLUMN user_locks.{column}"
        op.execute(f"COMMENT ON {target} IS {_quoted(comment)}")


def downgrade() -> None:
    op.execute("DROP TABLE IF EXISTS user_locks")
