"""Rules every migration follows (imported by migrations/): index builds that do not block
writes, downgrades that refuse to drop data unless forced. Lock and statement timeouts, and the
retries of a migration that waited too long for a lock: app/db/migration_locks.py."""

from __future__ import annotations

import ast
import inspect
from collections.abc import Sequence
from pathlib import Path

import sqlalchemy as sa
from alembic import context, op
from alembic.script import Script
from alembic.util import CommandError

from app.db.migration_locks import execute_concurrently
from app.db.migration_locks import option as _option

# What each released revision's downgrade would lose, counted before it refuses: (what, SQL
# counting it). The released migrations name only what they drop (their text is frozen), so
# their counts live here; a new revision passes its own to refuse_data_loss.
RELEASED_LOSSES: dict[str, tuple[tuple[str, str], ...]] = {
    "0001_initial_schema": (
        ("memories", "SELECT count(*) FROM memories"),
        ("messages", "SELECT count(*) FROM messages"),
        ("outbox", "SELECT count(*) FROM outbox"),
    ),
    "0003_ingestion": (
        ("ingest_decisions", "SELECT count(*) FROM ingest_decisions"),
        ("ingest_tasks", "SELECT count(*) FROM ingest_tasks"),
        (
            "messages with an idempotency key",
            "SELECT count(*) FROM messages WHERE idempotency_key IS NOT NULL",
        ),
    ),
    "0005_write_path": (
        (
            "messages with a 768D embedding",
            "SELECT count(*) FROM messages WHERE embedding_768d IS NOT NULL",
        ),
    ),
    "0006_memory_external_ids": (
        (
            "memories with an external id",
            "SELECT count(*) FROM memories WHERE external_id IS NOT NULL",
        ),
    ),
    "0007_tenants": (
        (
            "memories of other tenants",
            "SELECT count(*) FROM memories "
            "WHERE tenant_id <> '00000000-0000-0000-0000-000000000001'",
        ),
        (
            "messages of other tenants",
            "SELECT count(*) FROM messages "
            "WHERE tenant_id <> '00000000-0000-0000-0000-000000000001'",
        ),
        ("tenants", "SELECT count(*) FROM tenants"),
        ("api_keys", "SELECT count(*) FROM api_keys"),
    ),
    "0010_memory_context": (
        ("memories with a context", "SELECT count(*) FROM memories WHERE context IS NOT NULL"),
        (
            "memories with a mentioned time",
            "SELECT count(*) FROM memories WHERE mentioned_at IS NOT NULL",
        ),
    ),
    "0012_categories": (
        ("categories", "SELECT count(*) FROM categories"),
        (
            "messages with a UTC offset",
            "SELECT count(*) FROM messages WHERE utc_offset_minutes IS NOT NULL",
        ),
        (
            "decisions with an event time, gate verdict or prompt version",
            "SELECT count(*) FROM ingest_decisions WHERE event_time IS NOT NULL "
            "OR llm_gate IS NOT NULL OR prompt_version IS NOT NULL",
        ),
    ),
}


class DataLossRefused(CommandError):
    """A downgrade that would drop stored data, not forced. A CommandError: the alembic
    command line prints its one line (`FAILED: ...`), not a traceback."""


def refusal_message(
    revision: str, what: str, counts: Sequence[tuple[str, int | None]], command: str
) -> str:
    """The one line a refused downgrade says (the one format every refusal uses)."""
    rows = ", ".join(f"{name}: {'?' if n is None else n}" for name, n in counts)
    return (
        f"downgrade of {revision} refused: it would drop {what} (rows: {rows or 'none counted'}); "
        f"back up first, then force it with `{command}`"
    )


def _force_command() -> str:
    """The alembic command line that forces the downgrade the caller asked for."""
    extra = [
        f"-x {name}={value}"
        for name, value in context.get_x_argument(as_dictionary=True).items()
        if name != "force"
    ]
    # As typed (`base`, `-1`, a revision): get_revision_argument() resolves `base` to None.
    target = op.get_context().opts.get("destination_rev") or "<revision>"
    return " ".join(["alembic", *extra, "-x force=true", "downgrade", str(target)])


def _count(counts: Sequence[tuple[str, str]]) -> list[tuple[str, int | None]]:
    if context.is_offline_mode():  # `--sql`: no database to count in
        return [(name, None) for name, _ in counts]
    bind = op.get_bind()
    return [(name, bind.execute(sa.text(sql)).scalar_one()) for name, sql in counts]


class _Counted(Exception):
    """What one revision's downgrade would lose, while refuse_whole_downgrade counts."""

    def __init__(self, revision: str, what: str, counts: list[tuple[str, int | None]]) -> None:
        super().__init__(revision)
        self.revision, self.what, self.counts = revision, what, counts


# While refuse_whole_downgrade counts: refuse_data_loss reports instead of refusing.
_counting = False


def refuse_data_loss(what: str, counts: Sequence[tuple[str, str]] | None = None) -> None:
    """Called first by a downgrade that drops stored data: it runs only when forced. `counts`
    (what, counting SQL) default to RELEASED_LOSSES of the calling revision."""
    if _option("force", "false").lower() == "true":
        return
    revision = str(inspect.stack()[1].frame.f_globals.get("revision", "this revision"))
    if counts is None:
        counts = RELEASED_LOSSES.get(revision, ())
    if _counting:
        raise _Counted(revision, what, _count(counts))
    raise DataLossRefused(refusal_message(revision, what, _count(counts), _force_command()))


def refuses_first(path: str) -> bool:
    """Whether the revision file's downgrade() begins with refuse_data_loss(...): only such a
    downgrade can be asked what it would lose without doing anything."""
    for node in ast.parse(Path(path).read_text()).body:
        if isinstance(node, ast.FunctionDef) and node.name == "downgrade":
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                first = node.body[1]  # past the docstring
            return (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Call)
                and isinstance(first.value.func, ast.Name)
                and first.value.func.id == "refuse_data_loss"
            )
    return False


def refuse_whole_downgrade(scripts: Sequence[Script]) -> None:
    """Before an unforced downgrade through `scripts` (highest first) runs anything: every
    revision among them that would refuse is counted, and one refusal names them all (each
    revision's own refusal stopped at the first, and the next run found the next)."""
    global _counting
    if _option("force", "false").lower() == "true" or not _online():
        return
    found: list[_Counted] = []
    _counting = True
    try:
        for script in scripts:
            if script.path is None or not refuses_first(script.path):
                continue
            try:
                script.module.downgrade()
            except _Counted as counted:
                found.append(counted)
    finally:
        _counting = False
    if len(found) == 1:
        first = found[0]
        raise DataLossRefused(
            refusal_message(first.revision, first.what, first.counts, _force_command())
        )
    if found:
        raise DataLossRefused(whole_refusal_message(found, _force_command()))


def whole_refusal_message(found: Sequence[_Counted], command: str) -> str:
    """The one line of a refused downgrade through several revisions that would lose data."""
    parts = []
    for counted in found:
        rows = ", ".join(f"{name}: {'?' if n is None else n}" for name, n in counted.counts)
        parts.append(f"{counted.revision}: {counted.what} (rows: {rows or 'none counted'})")
    names = ", ".join(counted.revision for counted in found)
    return (
        f"downgrade through {names} refused: it would drop, by revision, "
        f"{'; '.join(parts)}; back up first, then force it with `{command}`"
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
            execute_concurrently(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")
    if not _online():
        op.execute(f"-- rerun: if {name} is INVALID (pg_index.indisvalid), drop it first")
    with op.get_context().autocommit_block():
        execute_concurrently(
            f"CREATE {kind} CONCURRENTLY IF NOT EXISTS {name} ON {table} {definition}"
        )


def drop_index_concurrently(name: str) -> None:
    with op.get_context().autocommit_block():
        execute_concurrently(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")


def validate_constraint(table: str, name: str) -> None:
    """VALIDATE a constraint added NOT VALID, in a transaction of its own (autocommit): it holds
    only SHARE UPDATE EXCLUSIVE while it scans, so reads and writes go on; the AccessExclusive
    (or ShareRowExclusive) lock of the ADD was released when that transaction committed. A
    validated constraint validates again in no time, so a rerun repeats it harmlessly."""
    with op.get_context().autocommit_block():
        execute_concurrently(f"ALTER TABLE {table} VALIDATE CONSTRAINT {name}")
