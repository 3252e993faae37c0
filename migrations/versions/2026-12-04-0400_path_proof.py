"""Path-proof SQL for readers (issue 42): no search_path, temporary table or look-alike
function can move an analyst to another tenant, and an analyst of one database cannot log
into another.

sql/path_proof_v1.sql gives the functions the policies call SQL-standard bodies (bound when
created, as a view's are), fixes the search_path of every other function of the schema, makes
the analysts' policies evaluate their tenant once per query, lets the auditor read every
analyst binding, and grants CONNECT to a login role when it is bound to a tenant (a trigger of
analyst_tenants). Then this revision takes CONNECT and TEMPORARY on the database, and CREATE on
schema public, from PUBLIC: the service's roles (cognis_rw, and so cognis_background) keep
CONNECT and TEMPORARY (bulk imports stage rows in a temporary table); each bound analyst keeps
CONNECT; an auditor's login is granted CONNECT by the DBA (docs/analysts.md).

Catalog changes only, in one transaction; rerunnable (CREATE OR REPLACE, DROP ... IF EXISTS,
ALTER ... which repeat harmlessly, GRANT/REVOKE).

Revision ID: 0023_path_proof
Revises: 0022_batch_jobs
Create Date: 2026-12-04 04:00:00
"""

from collections.abc import Sequence

from alembic import op

from app.db.sqlscript import run_sql_file

revision: str = "0023_path_proof"
down_revision: str | None = "0022_batch_jobs"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_DATABASE_PRIVILEGES_UNDONE = """
DO $$
DECLARE
    db text := current_database();
BEGIN
    IF pg_has_role(current_user, (SELECT datdba FROM pg_database WHERE datname = db), 'MEMBER')
       OR (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
        EXECUTE format('GRANT CONNECT, TEMPORARY ON DATABASE %I TO PUBLIC', db);
        EXECUTE format('REVOKE CONNECT, TEMPORARY ON DATABASE %I FROM cognis_rw', db);
    END IF;
END $$
"""


def upgrade() -> None:
    run_sql_file("path_proof_v1.sql")
    run_sql_file("database_privileges_v1.sql")


def downgrade() -> None:
    # CREATE on schema public stays PUBLIC's no more: PostgreSQL 15 and later create it so.
    op.execute(_DATABASE_PRIVILEGES_UNDONE)
    run_sql_file("path_proof_v1_drop.sql")
