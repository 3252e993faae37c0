"""Alembic environment: async, URL from settings (COGNIS_MIGRATION_DATABASE_URL, else
COGNIS_DATABASE_URL) or from the caller's config attributes."""

from __future__ import annotations

import asyncio
import os
from logging.config import fileConfig
from typing import Any

from alembic import context
from alembic.operations import Operations
from alembic.script import Script, ScriptDirectory
from alembic.util import CommandError
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import create_async_engine

from app.db.engine import application_name
from app.db.migration_safety import (
    refuse_whole_downgrade,
    session_timeouts,
    stopped_by_timeout,
)
from app.db.models import Base
from app.tenants import models as tenant_models  # noqa: F401 (their tables join Base.metadata)

config = context.config
if config.config_file_name is not None and config.attributes.get("configure_logger", True):
    fileConfig(config.config_file_name, disable_existing_loggers=False)

target_metadata = Base.metadata


def _database_url() -> str:
    url = config.attributes.get("database_url")
    if url:
        return str(url)
    from app.config import get_settings

    settings = get_settings()
    # The tables' owner migrates; the service's own role may only read and write rows.
    return (settings.store.migration_database_url or settings.store.database_url).get_secret_value()


def _configure(connection: Connection | None = None, **kwargs: object) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        compare_type=True,
        transaction_per_migration=True,
        # COMMENT ON lives in sql/ (table_comments_v1.sql and the views' files), written once
        # there, not repeated in the models: `alembic check` leaves comments alone.
        autogenerate_plugins=["alembic.autogenerate.*", "~alembic.autogenerate.comments"],
        **kwargs,  # type: ignore[arg-type]
    )


def run_migrations_offline() -> None:
    """`alembic upgrade head --sql`: the script for a DBA to review and run. It needs no
    database, so no URL: the dialect is enough."""
    url = config.attributes.get("database_url")
    target = {"url": str(url)} if url else {"dialect_name": "postgresql"}
    _configure(literal_binds=True, dialect_opts={"paramstyle": "named"}, **target)
    for statement in session_timeouts():
        context.execute(statement)
    with context.begin_transaction():
        context.run_migrations()


def _downgrade_path() -> list[Script]:
    """The revisions an unforced `alembic downgrade` is about to take down, highest first
    (empty for an upgrade, or a relative target such as -1, which each refusal still guards)."""
    migration = context.get_context()
    fn = migration.opts.get("fn")
    target = migration.opts.get("destination_rev")
    if getattr(fn, "__name__", "") != "downgrade" or target is None or target.startswith("-"):
        return []
    scripts = context.script
    lower = None if target == "base" else scripts.get_revision(target)
    below = set() if lower is None else {lower.revision, *_ancestors(scripts, lower.revision)}
    path = []
    for head in migration.get_current_heads():
        for script in scripts.iterate_revisions(head, "base"):
            if script.revision not in below and script not in path:
                path.append(script)
    return path


def _ancestors(scripts: ScriptDirectory, revision: str) -> set[str]:
    return {s.revision for s in scripts.iterate_revisions(revision, "base")}


def _run_sync(connection: Connection) -> None:
    for statement in session_timeouts():
        connection.exec_driver_sql(statement)
    connection.commit()  # session settings, outside the migrations' own transactions
    _configure(connection)
    # A refused downgrade names every revision on its way that would lose data, before any
    # of them runs (each revision's own refusal would stop at the first).
    with Operations.context(context.get_context()):
        refuse_whole_downgrade(_downgrade_path())
    connection.rollback()
    with context.begin_transaction():
        context.run_migrations()


def _interruptions(engine: Engine) -> None:
    """Fault injection for tests/test_migration_rerun.py, off unless its variables are set.

    COGNIS_MIGRATION_TRACE=<file>: one line per statement the migrations run (its number,
    `autocommit` when it ran outside a transaction, so it committed by itself, else `tx`; its
    first line), and `commit` where a transaction committed.
    COGNIS_MIGRATION_KILL_AFTER=<n>: the process ends abruptly right after the n-th statement,
    before anything else is sent: an open transaction is lost with the connection, as when a
    migration is killed or its session dropped."""
    trace, kill_after = (os.environ.get(f"COGNIS_MIGRATION_{k}") for k in ("TRACE", "KILL_AFTER"))
    if not (trace or kill_after):
        return
    count = 0

    def _record(line: str) -> None:
        if trace:
            with open(trace, "a") as handle:
                handle.write(line + "\n")

    @event.listens_for(engine, "after_cursor_execute")
    def _after(conn: Connection, _cursor: Any, statement: str, *_args: Any) -> None:
        nonlocal count
        count += 1
        isolation = conn.get_execution_options().get("isolation_level")
        mode = "autocommit" if isolation == "AUTOCOMMIT" else "tx"
        _record(f"{count}\t{mode}\t{statement.strip().splitlines()[0][:120]}")
        if kill_after and count == int(kill_after):
            os._exit(75)

    @event.listens_for(engine, "commit")
    def _commit(_conn: Connection) -> None:
        _record(f"{count}\tcommit")


async def run_migrations_online() -> None:
    # pg_stat_activity names the migration's session (what a DBA looks for when it waits).
    engine = create_async_engine(
        _database_url(),
        connect_args={"server_settings": {"application_name": application_name("migrate")}},
    )
    _interruptions(engine.sync_engine)
    async with engine.connect() as connection:
        await connection.run_sync(_run_sync)
        await connection.commit()
    await engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    try:
        asyncio.run(run_migrations_online())
    except DBAPIError as error:
        # A lock or statement timeout: one line saying to rerun (alembic prints a CommandError
        # as `FAILED: ...`), not a traceback.
        message = stopped_by_timeout(error)
        if message is None:
            raise
        raise CommandError(message) from None
