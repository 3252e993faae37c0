"""Console sessions (issue 42): the console's cookie holds a session secret, not the API key.

`console_sessions` keeps, per login, the secret's SHA-256 and the API key sealed under a key
derived from the secret (app/console/sessions.py): neither the cookie nor the table alone is
a key. The service's roles log in and out (cognis_rw: SELECT, INSERT, DELETE, and UPDATE for
the retention job's row locks); no reader role sees it. Expired rows are deleted by the
retention job, through `console_sessions_expires_at_idx`.

A new, empty table: one transaction, rerunnable (IF NOT EXISTS; GRANT repeats harmlessly).
Going down logs every console user out, which loses nothing: not forced.

Revision ID: 0027_console_sessions
Revises: 0026_retention
Create Date: 2026-12-04 04:40:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0027_console_sessions"
down_revision: str | None = "0026_retention"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE IF NOT EXISTS console_sessions (
            id bytea NOT NULL,
            sealed_key bytea NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now(),
            expires_at timestamptz NOT NULL,
            CONSTRAINT console_sessions_pkey PRIMARY KEY (id)
        )
        """
    )
    op.execute(
        "CREATE INDEX IF NOT EXISTS console_sessions_expires_at_idx "
        "ON console_sessions (expires_at)"
    )
    # UPDATE only for the retention job's FOR UPDATE SKIP LOCKED: nothing updates a session.
    op.execute("GRANT SELECT, INSERT, UPDATE, DELETE ON console_sessions TO cognis_rw")
    op.execute(
        "COMMENT ON TABLE console_sessions IS 'Console logins: the SHA-256 of the session "
        "cookie''s secret and the API key sealed under a key derived from it "
        "(app/console/sessions.py). Deleted at log out, and by the retention job once expired.'"
    )


def downgrade() -> None:
    op.execute("DROP TABLE IF EXISTS console_sessions")
