"""Alembic environment: async, URL from settings (COGNIS_MIGRATION_DATABASE_URL, else
COGNIS_DATABASE_URL) or from the caller's config attributes."""

from __future__ import annotations

import asyncio
from logging.config import fileConfig

from alembic import context
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import create_async_engine

from app.db.migration_safety import session_timeouts
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
    return (settings.migration_database_url or settings.database_url).get_secret_value()


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


def _run_sync(connection: Connection) -> None:
    for statement in session_timeouts():
        connection.exec_driver_sql(statement)
    connection.commit()  # session settings, outside the migrations' own transactions
    _configure(connection)
    with context.begin_transaction():
        context.run_migrations()


async def run_migrations_online() -> None:
    engine = create_async_engine(_database_url())
    async with engine.connect() as connection:
        await connection.run_sync(_run_sync)
        await connection.commit()
    await engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    asyncio.run(run_migrations_online())
