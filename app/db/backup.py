"""Backups that restore whole (issue 42): a dump whose rows are counted in its own snapshot
and checked against what it holds, and a restore checked against those counts.

A dump is `pg_dump --format=custom` in a snapshot exported by a transaction that counted every
table's rows, as a role that bypasses row-level security (`cognis_backup`: BYPASSRLS, member of
pg_read_all_data, nothing else). The counting transaction sets `row_security = off`, so a role
that would see only some rows fails at once instead of writing a partial dump that exits 0 (a
plain pg_dump by the owner, under a tenant setting, dumped 3 of 8,075 rows). The dump's own
data is then read back (`pg_restore --data-only`) and counted per table: the file is kept, with
`<file>.counts.json` beside it, only when every count matches.

A restore goes into a new database: `pg_restore --no-owner --single-transaction
--exit-on-error`, without the extensions' comments (their owner is the superuser who created
them, which a database owner is not) and the catalog's privileges the superuser's hardening
changed (a new database has them from template1), then the database-level privileges migration
0023_path_proof sets and the backup roles' CONNECT, then the rows counted again against the
dump's counts. OpenSearch is not in the dump: `python -m app reindex` rebuilds it from the
restored Postgres.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from collections.abc import Callable
from pathlib import Path

import asyncpg
from sqlalchemy.engine import make_url

from app.db.sqlscript import SQL_DIR

Progress = Callable[[str], None]
_TABLES = "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename"
_COPY = re.compile(r'^COPY public\.("?)([\w$]+)\1 \(')
# The groups the dump's grants name; a restore into another cluster needs them first.
GROUP_ROLES = ("cognis_rw", "cognis_background", "cognis_analyst", "cognis_auditor")
# The next `make backup` of a restored database connects as the backup role: a dump carries no
# database privileges, so the restore grants CONNECT to every backup role of the cluster (a
# login that bypasses row security and reads all data: what docs/operations.md makes).
_BACKUP_ROLES_CONNECT = """
DO $$
DECLARE
    backup_role record;
BEGIN
    FOR backup_role IN
        SELECT rolname FROM pg_roles
         WHERE rolbypassrls AND rolcanlogin AND NOT rolsuper
           AND pg_has_role(oid, 'pg_read_all_data', 'MEMBER')
    LOOP
        EXECUTE format('GRANT CONNECT ON DATABASE %I TO %I', current_database(),
                       backup_role.rolname);
    END LOOP;
END $$
"""


def _superusers_entry(listed: str) -> bool:
    """An entry of `pg_restore --list` only a superuser may restore: an extension's comment
    (its owner is the superuser who created it), and the privileges of the catalog's own
    functions and views, which scripts/database-hardening.sql changes (pg_dump dumps those
    changes; the owner may not repeat them, and a new database has them from template1)."""
    return "COMMENT - EXTENSION" in listed or " ACL pg_catalog " in listed


class BackupError(RuntimeError):
    """A dump or a restore that is not whole; the message says what differs and what to do."""


def libpq_parts(url: str) -> tuple[str, dict[str, str]]:
    """A SQLAlchemy URL as a libpq connection string without its password, and the
    environment that carries the password (never on a command line)."""
    parsed = make_url(url)
    env = {**os.environ}
    if parsed.password is not None:
        env["PGPASSWORD"] = str(parsed.password)
    dsn = parsed._replace(drivername="postgresql", password=None).render_as_string()
    return dsn, env


async def _connect(url: str) -> asyncpg.Connection:
    parsed = make_url(url)
    return await asyncpg.connect(
        user=parsed.username,
        password=parsed.password,
        host=parsed.host,
        port=parsed.port,
        database=parsed.database,
    )


async def count_rows(connection: asyncpg.Connection) -> dict[str, int]:
    """Every table of schema public and its rows, as this connection sees them."""
    tables = [row["tablename"] for row in await connection.fetch(_TABLES)]
    return {
        table: int(await connection.fetchval(f'SELECT count(*) FROM public."{table}"'))  # noqa: S608
        for table in tables
    }


async def _run(*command: str, env: dict[str, str] | None = None) -> str:
    """Run a client program; its standard output, or BackupError with its own message."""
    process = await asyncio.create_subprocess_exec(
        *command, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    stdout, stderr = await process.communicate()
    if process.returncode != 0:
        raise BackupError(f"{command[0]} failed ({process.returncode}): {stderr.decode().strip()}")
    return stdout.decode()


async def rows_in_dump(path: Path) -> dict[str, int]:
    """The rows of each table's data in a custom-format dump, read back from the file."""
    process = await asyncio.create_subprocess_exec(
        "pg_restore", "--data-only", "--file=-", str(path),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        limit=2**26,  # a line is a row: memories' vectors make long ones
    )  # fmt: skip
    assert process.stdout is not None
    counts: dict[str, int] = {}
    table: str | None = None
    async for raw in process.stdout:
        line = raw.decode()
        if table is None:
            if match := _COPY.match(line):
                table = match.group(2)
                counts[table] = 0
        elif line == "\\.\n":
            table = None
        else:
            counts[table] += 1
    _, stderr = await process.communicate()
    if process.returncode != 0:
        raise BackupError(f"pg_restore could not read {path}: {stderr.decode().strip()}")
    return counts


def counts_path(dump: Path) -> Path:
    return dump.with_name(dump.name + ".counts.json")


def _differences(expected: dict[str, int], found: dict[str, int]) -> list[str]:
    return [
        f"{table}: {expected.get(table, 0)} expected, {found.get(table, 0)} found"
        for table in sorted(set(expected) | set(found))
        if expected.get(table, 0) != found.get(table, 0)
    ]


async def dump(url: str, out: Path, progress: Progress = print) -> dict[str, int]:
    """Dump the database of `url` (a role that bypasses row-level security) into `out`, with
    its row counts beside it; raise BackupError, leaving no file, unless the dump is whole."""
    partial = out.with_name(out.name + ".partial")
    connection = await _connect(url)
    try:
        async with connection.transaction(isolation="repeatable_read", readonly=True):
            try:
                await connection.execute("SET LOCAL row_security = off")
                counts = await count_rows(connection)
            except asyncpg.InsufficientPrivilegeError as exc:
                raise BackupError(
                    f"the backup role cannot read every row ({exc}): dump as a role with "
                    "BYPASSRLS and pg_read_all_data (cognis_backup, docs/operations.md)"
                ) from exc
            snapshot = await connection.fetchval("SELECT pg_export_snapshot()")
            total = sum(counts.values())
            progress(f"dumping {len(counts)} tables, {total} rows, in snapshot {snapshot}")
            dsn, env = libpq_parts(url)
            partial.touch(mode=0o600)  # a dump holds every user's data: the owner's eyes only
            await _run(
                "pg_dump", "--format=custom", "--no-password", f"--snapshot={snapshot}",
                f"--file={partial}", f"--dbname={dsn}",
                env=env,
            )  # fmt: skip
        progress(f"checking the dump's rows ({partial.stat().st_size} bytes)")
        if differences := _differences(counts, await rows_in_dump(partial)):
            raise BackupError("the dump is not whole: " + "; ".join(differences))
        partial.replace(out)
        counts_path(out).touch(mode=0o600)
        counts_path(out).write_text(json.dumps(counts, indent=1, sort_keys=True) + "\n")
        progress(f"wrote {out} and {counts_path(out).name}: {total} rows")
        return counts
    finally:
        await connection.close()
        partial.unlink(missing_ok=True)


async def restore(owner_url: str, dump_file: Path, progress: Progress = print) -> dict[str, int]:
    """Restore `dump_file` into the empty database of `owner_url` (its owner; the group roles
    exist already where the role-admin step made them, else the owner needs CREATEROLE once),
    then check its rows against the dump's counts."""
    expected = json.loads(counts_path(dump_file).read_text())
    connection = await _connect(owner_url)
    try:
        if tables := await connection.fetch(_TABLES):
            raise BackupError(
                f"database {make_url(owner_url).database} is not empty ({len(tables)} tables): "
                "restore into a new database"
            )
        for role in GROUP_ROLES:  # constants: a role may not be a bind parameter of DO
            await connection.execute(
                f"DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{role}') "  # noqa: S608
                f"THEN CREATE ROLE {role} NOLOGIN; END IF; END $$"
            )
        dsn, env = libpq_parts(owner_url)
        listing = dump_file.with_name(dump_file.name + ".list")
        try:
            contents = await _run("pg_restore", "--list", str(dump_file))
            entries = [ln for ln in contents.splitlines() if not _superusers_entry(ln)]
            listing.write_text("\n".join(entries) + "\n")
            progress(f"restoring {dump_file} into {make_url(owner_url).database}")
            await _run(
                "pg_restore", "--no-owner", "--single-transaction", "--exit-on-error",
                "--no-password", f"--use-list={listing}", f"--dbname={dsn}", str(dump_file),
                env=env,
            )  # fmt: skip
        finally:
            listing.unlink(missing_ok=True)
        await connection.execute((SQL_DIR / "database_privileges_v1.sql").read_text())
        await connection.execute(_BACKUP_ROLES_CONNECT)
        # The owner counts every tenant's rows as background work does: in cognis_background,
        # with no tenant set (the restored tables force row-level security on their owner).
        await connection.execute(
            "DO $$ BEGIN GRANT cognis_background TO current_user; "
            "EXCEPTION WHEN insufficient_privilege THEN NULL; END $$"
        )
        async with connection.transaction(isolation="repeatable_read", readonly=True):
            await connection.execute("SELECT set_config('cognis.tenant_id', '', true)")
            found = await count_rows(connection)
        if differences := _differences(expected, found):
            raise BackupError("the restore is not whole: " + "; ".join(differences))
        progress(f"restored {sum(found.values())} rows in {len(found)} tables, as dumped")
        return found
    finally:
        await connection.close()


async def create_database(owner_url: str, name: str) -> None:
    """A new, empty database `name` owned by the role of `owner_url` (CREATEDB); one that
    exists already is refused, so a restore never lands on data."""
    connection = await _connect(owner_url)
    try:
        if await connection.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", name):
            raise BackupError(f"database {name} exists: restore into a new one")
        await connection.execute(f'CREATE DATABASE "{name}"')
    finally:
        await connection.close()
