"""Tenants and API keys under row-level security (issue 53): the request role reads its own
tenant's row only, and finds a key's tenant through functions that return only that key's.

Until now `cognis_rw` read and wrote `tenants` and `api_keys` of every tenant: a compromised
request process could list every tenant's keys (their hashes), revoke them, mint keys for
another tenant or delete a tenant with all its rows. Now:
- Row-level security on both (enabled, not forced: the owner manages them, as it does
  `analyst_tenants`): a member of `cognis_rw` sees the rows of the tenant its transaction
  sets; `cognis_background` with no tenant set sees and changes every tenant's, which is
  how the admin API and `python -m app admin` run (as the worker role); `cognis_auditor` reads
  `tenants` (its grant of 0016).
- `cognis_rw` keeps SELECT only; INSERT, UPDATE and DELETE move to `cognis_background`.
- The key check, which runs before a tenant is known, calls `cognis_key_owner(prefix, hash)`
  (the key, tenant and last use of the live key of that prefix and SHA-256, or nothing) and
  `cognis_key_used(prefix, hash)` (its last_used_at): SECURITY DEFINER, so the hash is
  compared in the database and no other row leaves it. EXECUTE for `cognis_rw` only.

Catalog changes only, in one transaction: no table is rewritten or scanned. Rerunnable
(policies dropped first, functions replaced); the downgrade restores 0007's grants.

Revision ID: 0042_tenant_tables_security
Revises: 0041_user_locks
Create Date: 2026-12-08 01:00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0042_tenant_tables_security"
down_revision: str | None = "0041_user_locks"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ADMIN = "TO cognis_background USING (cognis_tenant() IS NULL) WITH CHECK (cognis_tenant() IS NULL)"
POLICIES = {
    "tenants": {
        "tenant_isolation": "USING (id = cognis_tenant()) WITH CHECK (id = cognis_tenant())",
        "background_admin": ADMIN,
        "auditor_read": "FOR SELECT TO cognis_auditor USING (true)",
    },
    "api_keys": {
        "tenant_isolation": "USING (tenant_id = cognis_tenant()) "
        "WITH CHECK (tenant_id = cognis_tenant())",
        "background_admin": ADMIN,
    },
}
FUNCTIONS = {
    "cognis_key_owner(text, text)": """
        CREATE OR REPLACE FUNCTION cognis_key_owner(key_prefix text, key_sha256 text)
        RETURNS TABLE (key_id uuid, tenant_id uuid, last_used_at timestamptz)
        LANGUAGE sql STABLE SECURITY DEFINER
        SET search_path = pg_catalog, public, pg_temp
        AS $$
            SELECT k.id, k.tenant_id, k.last_used_at FROM public.api_keys k
             WHERE k.prefix = key_prefix AND k.key_hash = key_sha256
               AND k.revoked_at IS NULL AND (k.expires_at IS NULL OR k.expires_at > now())
        $$
    """,
    "cognis_key_used(text, text)": """
        CREATE OR REPLACE FUNCTION cognis_key_used(key_prefix text, key_sha256 text)
        RETURNS void
        LANGUAGE sql VOLATILE SECURITY DEFINER
        SET search_path = pg_catalog, public, pg_temp
        AS $$
            UPDATE public.api_keys SET last_used_at = now()
             WHERE prefix = key_prefix AND key_hash = key_sha256
        $$
    """,
}
COMMENTS = {
    "cognis_key_owner(text, text)": "The key id, tenant and last use of the live API key of "
    "this prefix and SHA-256, or no row: the key check of the request role, which reads no "
    "other api_keys row (0042).",
    "cognis_key_used(text, text)": "Records a use of the API key of this prefix and SHA-256 "
    "(last_used_at): the request role's only write to api_keys (0042).",
}


def _quoted(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def upgrade() -> None:
    for table, policies in POLICIES.items():
        op.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
        for name, rule in policies.items():
            op.execute(f"DROP POLICY IF EXISTS {table}_{name} ON {table}")
            op.execute(f"CREATE POLICY {table}_{name} ON {table} {rule}")
        op.execute(f"REVOKE INSERT, UPDATE, DELETE ON {table} FROM cognis_rw")
        op.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON {table} TO cognis_background")
    for signature, definition in FUNCTIONS.items():
        op.execute(definition)
        op.execute(f"REVOKE ALL ON FUNCTION {signature} FROM PUBLIC")
        op.execute(f"GRANT EXECUTE ON FUNCTION {signature} TO cognis_rw")
        op.execute(f"COMMENT ON FUNCTION {signature} IS {_quoted(COMMENTS[signature])}")


def downgrade() -> None:
    for signature in FUNCTIONS:
        op.execute(f"DROP FUNCTION IF EXISTS {signature}")
    for table, policies in POLICIES.items():
        for name in policies:
            op.execute(f"DROP POLICY IF EXISTS {table}_{name} ON {table}")
        op.execute(f"ALTER TABLE {table} DISABLE ROW LEVEL SECURITY")
        op.execute(f"REVOKE INSERT, UPDATE, DELETE ON {table} FROM cognis_background")
        op.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON {table} TO cognis_rw")
