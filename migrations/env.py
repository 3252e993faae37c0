"""Alembic environment: async, URL from settings (COGNIS_MIGRATION_DATABASE_URL, else
COGNIS_DATABASE_URL) or from the caller's config attributes."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import threading
from logging.config import fileConfig
from typing import Any

from alembic import context
from alembic.operations import Operations
from alembic.script import Script, ScriptDirectory
from alembic.util import CommandError
from sqlalchemy import event, text
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import NullPool

from app.db.engine import application_name
from app.db.migration_locks import LockRetry, session_timeouts, stopped_by_timeout
from app.db.migration_safety import refuse_whole_downgrade
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
    # Postgres 14 and later stop a statement whose client is gone (a killed migration).
    check = (connection.dialect.server_version_info or (0,)) >= (14,)
    for statement in session_timeouts(check_connection=check):
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


class _StopOnSignal:
    """SIGTERM or SIGINT while migrating: the statement running on the server is cancelled
    (pg_cancel_backend from a second connection), and no further statement starts, so a
    killed migration leaves no index build running on behind it. A second signal ends the
    process at once. (kill -9 cannot be caught: client_connection_check_interval lets the
    server notice the closed connection within a second and stop the statement itself.)"""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self.backend_pid: int | None = None
        self.signal: int | None = None
        self.received = asyncio.Event()
        self._cancelling: set[asyncio.Task[None]] = set()
        self._before: dict[int, Any] = {}
        event.listen(engine.sync_engine, "before_cursor_execute", self._refuse_after_signal)

    def install(self) -> bool:
        """Handlers on this loop; only the main thread may (tests and `python -m app migrate`
        may run alembic in another)."""
        if threading.current_thread() is not threading.main_thread():
            return False
        loop = asyncio.get_running_loop()
        self._before = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
        for sig in self._before:
            loop.add_signal_handler(sig, self._received, sig)
        return True

    def remove(self) -> None:
        """The handlers of the process that ran alembic (`python -m app migrate`, a test)."""
        loop = asyncio.get_running_loop()
        for sig, before in self._before.items():
            loop.remove_signal_handler(sig)
            signal.signal(sig, before)

    def _received(self, sig: int) -> None:
        if self.signal is not None:
            os._exit(128 + sig)
        self.signal = sig
        self.received.set()
        if self.backend_pid is not None:
            task = asyncio.get_running_loop().create_task(self._cancel(self.backend_pid))
            self._cancelling.add(task)
            task.add_done_callback(self._cancelling.discard)

    async def _cancel(self, pid: int) -> None:
        # An engine of its own: the migration's refuses every statement once signalled.
        canceller = create_async_engine(self.engine.url, poolclass=NullPool)
        try:
            async with canceller.connect() as connection:
                await connection.execute(text("SELECT pg_cancel_backend(:pid)"), {"pid": pid})
        finally:
            await canceller.dispose()

    def _refuse_after_signal(self, *_args: Any) -> None:
        if self.signal is not None:
            raise self.stopped()

    def stopped(self) -> SystemExit:
        name = signal.Signals(self.signal or signal.SIGTERM).name
        print(
            f"migration stopped by {name}: its running statement was cancelled on the server "
            "and nothing half-done stays (a transaction rolled back; an index build left "
            "INVALID is dropped and built again): rerun the same command to finish",
            file=sys.stderr,
            flush=True,
        )
        return SystemExit(128 + (self.signal or signal.SIGTERM))


async def _migrate_once(engine: AsyncEngine, stop: _StopOnSignal) -> None:
    async with engine.connect() as connection:
        raw = await connection.get_raw_connection()
        stop.backend_pid = raw.driver_connection.get_server_pid()  # type: ignore[union-attr]
        try:
            await connection.run_sync(_run_sync)
            await connection.commit()
        finally:
            stop.backend_pid = None


async def _version(engine: AsyncEngine) -> str | None:
    try:
        async with engine.connect() as connection:
            found = await connection.execute(text("SELECT version_num FROM alembic_version"))
            return found.scalar()
    except DBAPIError:
        return None


async def run_migrations_online() -> None:
    """Run the migrations; one stopped by lock_timeout is rolled back and run again after a
    pause, until lock_retry_s have passed (app/db/migration_locks.py): a long reader makes
    the migration wait, not the service."""
    # pg_stat_activity names the migration's session (what a DBA looks for when it waits).
    # NullPool: each try on a fresh connection, whatever state a failed one was left in.
    engine = create_async_engine(
        _database_url(),
        poolclass=NullPool,
        connect_args={"server_settings": {"application_name": application_name("migrate")}},
    )
    _interruptions(engine.sync_engine)
    retry = LockRetry.configured()
    stop = _StopOnSignal(engine)
    installed = stop.install()
    try:
        while True:
            try:
                await _migrate_once(engine, stop)
                return
            except (DBAPIError, SystemExit) as error:
                if stop.signal is not None:
                    raise stop.stopped() from None
                if not isinstance(error, DBAPIError):
                    raise
                wait = retry.next_wait(error)
                if wait is None:
                    message = stopped_by_timeout(error, retry)
                    if message is None:
                        raise
                    # One line saying to rerun (alembic prints a CommandError as `FAILED:
                    # ...`), not a traceback.
                    raise CommandError(message) from None
                progress = retry.progress(error, wait, await _version(engine))
                print(progress, file=sys.stderr, flush=True)
                with contextlib.suppress(TimeoutError):  # a signal ends the pause
                    await asyncio.wait_for(stop.received.wait(), wait)
                if stop.signal is not None:
                    raise stop.stopped() from None
    finally:
        if installed:
            stop.remove()
        await engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    asyncio.run(run_migrations_online())
