"""The database roles of a benchmark, since tenants (README "Tenants and their keys").

Requests run as the request role (COGNIS_DATABASE_URL), which owns nothing and sees no rows
until a tenant is set. A benchmark's own SQL that creates databases or tables, drops and
rebuilds indexes or bulk-loads synthetic rows connects as the tables' owner
(COGNIS_MIGRATION_DATABASE_URL) instead, and writes its rows as the default tenant: the tenant
the development key and COGNIS_API_KEY_HASHES act for, so the API it measures sees them.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from app.config import Settings
from app.db.engine import create_engine
from app.db.tenant import DEFAULT_TENANT_ID, tenant_scope


def owner_url(settings: Settings) -> str:
    """The tables' owner (the migration role; unset: the one role of the deployment)."""
    return (settings.migration_database_url or settings.database_url).get_secret_value()


def owner_engine(settings: Settings) -> AsyncEngine:
    return create_engine(settings, owner_url(settings))


def urls_on(settings: Settings, database: str) -> dict[str, str]:
    """The request, worker and owner URLs moved to another database of the same server (a
    scratch database), as Settings fields; the roles are the server's, so they log in there."""
    urls = {
        "database_url": settings.database_url,
        "worker_database_url": settings.worker_database_url or settings.database_url,
        "migration_database_url": settings.migration_database_url or settings.database_url,
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
