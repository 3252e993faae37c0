"""The database roles of a benchmark, since tenants (docs/tenants.md).

Requests run as the request role (COGNIS_DATABASE_URL), which owns nothing and sees no rows
until a tenant is set. A benchmark's own SQL that creates databases or tables, drops and
rebuilds indexes or bulk-loads synthetic rows connects as the tables' owner
(COGNIS_MIGRATION_DATABASE_URL) instead, and writes its rows as the default tenant: the tenant
the development key and COGNIS_API_KEY_HASHES act for, so the API it measures sees them.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Coroutine
from pathlib import Path
from typing import Any

from pydantic import SecretStr
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, create_async_engine

from app.config import Settings
from app.db.engine import create_engine
from app.db.tenant import DEFAULT_TENANT_ID, tenant_scope


def owner_url(settings: Settings) -> str:
    """The tables' owner (the migration role; unset: the one role of the deployment)."""
    return (settings.store.migration_database_url or settings.store.database_url).get_secret_value()


def owner_engine(settings: Settings) -> AsyncEngine:
    return create_engine(settings.store, owner_url(settings))


def urls_on(settings: Settings, database: str) -> dict[str, str]:
    """The request, worker and owner URLs moved to another database of the same server (a
    scratch database), as Settings fields; the roles are the server's, so they log in there."""
    urls = {
        "database_url": settings.store.database_url,
        "worker_database_url": settings.store.worker_database_url or settings.store.database_url,
        "migration_database_url": settings.store.migration_database_url
        or settings.store.database_url,
    }
    return {
        field: make_url(url.get_secret_value())
        .set(database=database)
        .render_as_string(hide_password=False)
        for field, url in urls.items()
    }


def environment(urls: dict[str, str]) -> dict[str, str]:
    """`urls_on`'s fields as the environment variables a service process reads."""
    return {f"COGNIS_{field.upper()}": url for field, url in urls.items()}


@contextlib.asynccontextmanager
async def default_tenant(engine: AsyncEngine) -> AsyncIterator[AsyncSession]:
    """A transaction of the default tenant (set where the service sets it, app/db/tenant.py):
    the rows it inserts take that tenant, and it reads that tenant's rows only."""
    with tenant_scope(DEFAULT_TENANT_ID):
        async with AsyncSession(engine) as session, session.begin():
            yield session


ROOT = Path(__file__).resolve().parent.parent


async def scratch_database(url: str, name: str, create: bool) -> None:
    admin = create_async_engine(url, isolation_level="AUTOCOMMIT")
    try:
        async with admin.connect() as connection:
            if not create:
                await connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
            elif not await connection.scalar(
                text("SELECT 1 FROM pg_database WHERE datname = :name"), {"name": name}
            ):
                await connection.execute(text(f'CREATE DATABASE "{name}"'))
    finally:
        await admin.dispose()


def migrate(urls: dict[str, str], revision: str = "head") -> bool:
    """`alembic upgrade revision` on the database of `urls` (`urls_on`'s fields); False, with
    its error printed, when it failed."""
    migrated = subprocess.run(  # noqa: S603 - our own interpreter and Alembic
        [sys.executable, "-m", "alembic", "upgrade", revision],
        cwd=ROOT,
        env={**os.environ, **environment(urls)},
        capture_output=True,
        text=True,
        check=False,
    )
    if migrated.returncode != 0:
        print(migrated.stderr[-3000:], file=sys.stderr)
    return migrated.returncode == 0


def settings_on(base: Settings, urls: dict[str, str]) -> Settings:
    """`base` with its database URLs moved to `urls` (`urls_on`'s fields)."""
    return base.model_copy(update={field: SecretStr(url) for field, url in urls.items()})


def measure_in_scratch_database(
    base: Settings,
    name: str,
    measure: Callable[[Settings, dict[str, str]], Coroutine[Any, Any, None]],
    keep: bool = False,
    revision: str = "head",
) -> int:
    """`in_scratch_database` running the coroutine `measure(settings, urls)`: the settings
    and the URLs of the scratch database."""
    return in_scratch_database(
        base,
        name,
        lambda urls: asyncio.run(measure(settings_on(base, urls), urls)),
        keep=keep,
        revision=revision,
    )


def in_scratch_database(
    base: Settings,
    name: str,
    work: Callable[[dict[str, str]], None],
    keep: bool = False,
    revision: str = "head",
) -> int:
    """Create the database `name` on the owner's server (unless it exists), migrate it to
    `revision` (head) with Alembic, run `work(urls)` (`urls_on`'s fields for it), and drop
    it, whatever happens, unless `keep` (a benchmark's loaded data kept for its next run).
    1 when the migration failed (its error printed), else 0."""
    admin_url = owner_url(base)
    scratch_urls = urls_on(base, name)
    asyncio.run(scratch_database(admin_url, name, create=True))
    try:
        if not migrate(scratch_urls, revision):
            return 1
        work(scratch_urls)
    finally:
        if not keep:
            asyncio.run(scratch_database(admin_url, name, create=False))
    return 0
