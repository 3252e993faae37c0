"""A database's complete schema as text, for comparing two databases: `pg_dump --schema-only`
(tables, columns, indexes, constraints, function bodies, views, policies, grants, comments),
with what differs between any two dumps of the same schema taken out (the header, SET lines,
psql's \\restrict keys)."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

PG_DUMP = shutil.which("pg_dump") or "/usr/lib/postgresql/15/bin/pg_dump"


def libpq_url(url: str) -> str:
    """The SQLAlchemy URL as libpq (pg_dump, psql) takes it."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


async def schema_of(url: str) -> str:
    process = await asyncio.create_subprocess_exec(
        PG_DUMP,
        "--schema-only",
        "--no-publications",
        "--no-subscriptions",
        libpq_url(url),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    stdout, stderr = await process.communicate()
    assert process.returncode == 0, stderr.decode()[-2000:]
    return normalise(stdout.decode())


def normalise(dump: str) -> str:
    kept = []
    for line in dump.splitlines():
        if not line.strip() or line.startswith(("--", "SET ", "\\restrict", "\\unrestrict")):
            continue
        if line.startswith("SELECT pg_catalog.set_config('search_path'"):
            continue
        kept.append(line)
    return "\n".join(kept) + "\n"


def first_difference(expected: str, actual: str) -> str:
    """The first differing lines, with context: enough to say what drifted."""
    import difflib

    diff = difflib.unified_diff(
        expected.splitlines(), actual.splitlines(), "fresh", "other", n=2, lineterm=""
    )
    return "\n".join(list(diff)[:60])


@asynccontextmanager
async def scratch_database(owner_url: str, template: str | None = None) -> AsyncIterator[str]:
    """A database of its own (a copy of `template` when given), dropped afterwards; its URL."""
    async with scratch_databases(owner_url) as make:
        yield await make(template)


@asynccontextmanager
async def scratch_databases(
    owner_url: str,
) -> AsyncIterator[Callable[[str | None], Awaitable[str]]]:
    """Databases of their own, made on demand (`await make(template)`: a copy of `template`
    when given; its URL), all dropped together at the end. The drops run at once: each DROP
    DATABASE waits on the checkpointer (about a second on a busy machine), and drops waiting
    together share its work."""
    url = make_url(owner_url)
    admin = create_async_engine(url, isolation_level="AUTOCOMMIT")
    names: list[str] = []

    async def make(template: str | None = None) -> str:
        name = f"cognis_mig_{uuid.uuid4().hex[:10]}"
        copy = f' TEMPLATE "{template}"' if template else ""
        names.append(name)
        async with admin.connect() as connection:
            await connection.execute(text(f'CREATE DATABASE "{name}"{copy}'))
        return url.set(database=name).render_as_string(hide_password=False)

    try:
        yield make
    finally:
        try:
            await asyncio.gather(*(drop_database(admin, name) for name in names))
        finally:
            await admin.dispose()


# A database still in use by another session (DROP waits 5 s for it, then gives up).
_IN_USE = "55006"


async def drop_database(admin: AsyncEngine, name: str, attempts: int = 6) -> None:
    """Drop a scratch database: end this role's own sessions in it (a killed migration's), then
    a plain DROP, which also stops an autovacuum worker there. Not `WITH (FORCE)`: that ends
    every session and refuses, at random, when one of them is not this role's (an autovacuum
    worker on a freshly copied database: "must be a member of the role whose process is being
    terminated", seen in CI)."""
    for attempt in range(1, attempts + 1):
        async with admin.connect() as connection:
            await connection.execute(
                text(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                    " WHERE datname = :name AND usename = current_user"
                    " AND pid <> pg_backend_pid()"
                ),
                {"name": name},
            )
            try:
                await connection.execute(text(f'DROP DATABASE IF EXISTS "{name}"'))
                return
            except DBAPIError as error:
                code = getattr(error.orig, "sqlstate", None) or getattr(error.orig, "pgcode", None)
                if code != _IN_USE or attempt == attempts:
                    raise


def database_name(url: str) -> str:
    return str(make_url(url).database)
