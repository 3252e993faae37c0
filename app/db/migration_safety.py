"""Rules every migration follows (imported by migrations/): lock and statement timeouts,
index builds that do not block writes, downgrades that refuse to drop data unless forced."""

from __future__ import annotations

import os

import sqlalchemy as sa
from alembic import context, op

# Defaults: a DDL statement waits at most this long for its lock (then fails, and the migration
# can simply be rerun), instead of queueing every reader and writer behind it.
DEFAULT_LOCK_TIMEOUT = "5s"
# 0 is off; HNSW index builds on big tables can take hours, so the default bound is generous.
DEFAULT_STATEMENT_TIMEOUT = "4h"


def _option(name: str, default: str) -> str:
    """`alembic -x name=value ...`, else COGNIS_MIGRATION_<NAME>, else the default."""
    given = context.get_x_argument(as_dictionary=True).get(name)
    return given or os.environ.get(f"COGNIS_MIGRATION_{name.upper()}", default)


def session_timeouts() -> list[str]:
    """SET statements for the migration session (session-wide: they also hold in autocommit
    blocks, where CREATE INDEX CONCURRENTLY runs)."""
    lock = _option("lock_timeout", DEFAULT_LOCK_TIMEOUT)
    statement = _option("statement_timeout", DEFAULT_STATEMENT_TIMEOUT)
    return [
        f"SET lock_timeout = '{_interval(lock)}'",
        f"SET statement_timeout = '{_interval(statement)}'",
    ]


def _interval(value: str) -> str:
    # Goes into SQL text (SET takes no bind parameters): digits and a unit only.
    if not value.replace(" ", "").isalnum():
        raise ValueError(f"a timeout is a number with an optional unit (5s, 10min), not {value!r}")
    return value


def refuse_data_loss(what: str) -> None:
    """Called first by a downgrade that drops stored data: it runs only when forced."""
    if _option("force", "false").lower() != "true":
        raise RuntimeError(
            f"this downgrade would drop {what}. Back up first, then rerun with "
            "`alembic -x force=true downgrade <revision>`."
        )


def _online() -> bool:
    """False for `alembic upgrade --sql`: there is no database to look at, so the script holds
    every statement and the notes below say what a DBA checks by hand on a rerun."""
    return not op.get_context().as_sql


def exists(condition: str) -> bool:
    """Whether `SELECT <condition>` is true in the database being migrated (False offline, where
    every statement is written out). Guards a step that a rerun must skip once it committed."""
    if not _online():
        return False
    return bool(op.get_bind().execute(sa.text(f"SELECT {condition}")).scalar())


def index_is_valid(name: str) -> bool | None:
    """True/False for an index that exists (valid or left INVALID by an interrupted concurrent
    build), None when there is none (or offline)."""
    if not _online():
        return None
    found = (
        op.get_bind()
        .execute(
            sa.text("SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass(:name)"),
            {"name": name},
        )
        .first()
    )
    return None if found is None else bool(found[0])


def create_index_concurrently(
    name: str, table: str, definition: str, *, unique: bool = False
) -> None:
    """CREATE INDEX CONCURRENTLY, outside the migration's transaction: writes go on while it
    builds. `definition` is what follows the table name: USING, columns, WITH, WHERE.

    Rerunnable: an interrupted concurrent build leaves the index INVALID (it is maintained on
    every write and never used), and `IF NOT EXISTS` would keep it; so an INVALID one is dropped
    (concurrently, a statement of its own) and built again."""
    kind = "UNIQUE INDEX" if unique else "INDEX"
    with op.get_context().autocommit_block():
        if index_is_valid(name) is False:
            op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")
    if not _online():
        op.execute(f"-- rerun: if {name} is INVALID (pg_index.indisvalid), drop it first")
    with op.get_context().autocommit_block():
        op.execute(f"CREATE {kind} CONCURRENTLY IF NOT EXISTS {name} ON {table} {definition}")


def drop_index_concurrently(name: str) -> None:
    with op.get_context().autocommit_block():
        op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")


def validate_constraint(table: str, name: str) -> None:
    """VALIDATE a constraint added NOT VALID, in a transaction of its own (autocommit): it holds
    only SHARE UPDATE EXCLUSIVE while it scans, so reads and writes go on; the AccessExclusive
    (or ShareRowExclusive) lock of the ADD was released when that transaction committed. A
    validated constraint validates again in no time, so a rerun repeats it harmlessly."""
    with op.get_context().autocommit_block():
        op.execute(f"ALTER TABLE {table} VALIDATE CONSTRAINT {name}")
