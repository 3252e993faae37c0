"""Backup and restore at 100,000 memories: the time and bytes of `python -m app backup` and
`python -m app restore` (what `make backup` and `make restore` run, docs/operations.md), with
the rows checked (issue 42).

A scratch database (created by the owner on its server, migrated to head) is filled by SQL
(bench/synthetic.py) with --memories memory versions in two tenants (three quarters in the
default one; users of 50 memories of 2 versions, 50 messages each, a decision per version,
a task per message), with random vectors: a dump's compression meets what it would meet in
real data (zero vectors would shrink to nothing). The backup role (COGNIS_BACKUP_DATABASE_URL,
granted CONNECT on the scratch database) dumps it with `python -m app backup`; the owner
restores the dump into a new database with `python -m app restore`. Both commands check every
table's rows themselves (and fail otherwise); this benchmark also compares the memories of
the two databases, ids and 768D vectors, by a digest. Both databases and the dump are
removed at the end. Prints numbers; asserts nothing.

    make bench-backup BENCH_ARGS="--memories 100000"
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

from app.config import Settings
from app.db.tenant import DEFAULT_TENANT_ID
from app.logging import configure_logging
from bench.database import (
    ROOT,
    environment,
    in_scratch_database,
    owner_engine,
    owner_url,
    scratch_database,
    settings_on,
)
from bench.synthetic import Users, fill

SECOND_TENANT = uuid.UUID("00000000-0000-0000-0000-0000000000b2")
DIGEST = (
    "SELECT count(*) AS rows, md5(string_agg(id::text || md5(embedding_768d::text), ','"
    " ORDER BY id)) AS digest FROM memories"
)


def shape(memories: int) -> list[Users]:
    per_user = 50 * 2
    default_users = memories * 3 // 4 // per_user
    second_users = memories // per_user - default_users
    return [
        Users(DEFAULT_TENANT_ID, "user-", default_users, 50, 2, 50),
        Users(SECOND_TENANT, "user-", second_users, 50, 2, 50),
    ]


def run(command: list[str], env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess]:
    started = time.perf_counter()
    done = subprocess.run(  # noqa: S603 - our own interpreter and module
        [sys.executable, "-m", "app", *command],
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=False,
    )
    elapsed = time.perf_counter() - started
    print(done.stdout.strip(), flush=True)
    if done.returncode != 0:
        print(done.stderr[-3000:], file=sys.stderr)
        raise SystemExit(f"{command[0]} failed ({done.returncode})")
    return elapsed, done


async def digest(url: str) -> tuple[int, str]:
    """Every memory version of every tenant, as the owner (in cognis_background, no tenant)."""
    engine = create_async_engine(url)
    try:
        async with engine.begin() as connection:
            await connection.execute(text("SELECT set_config('cognis.tenant_id', '', true)"))
            row = (await connection.execute(text(DIGEST))).one()
            return int(row.rows), str(row.digest)
    finally:
        await engine.dispose()


async def database_bytes(url: str) -> int:
    engine = create_async_engine(url)
    try:
        async with engine.connect() as connection:
            return int(
                (
                    await connection.execute(text("SELECT pg_database_size(current_database())"))
                ).scalar_one()
            )
    finally:
        await engine.dispose()


async def prepare(settings: Settings, memories: int, backup_role: str) -> tuple[int, str]:
    owner = owner_engine(settings)
    try:
        groups = shape(memories)
        print(f"filling {sum(g.memory_versions for g in groups):,} memory versions", flush=True)
        await fill(owner, groups, vectors="random", progress=lambda s: print(s, flush=True))
        async with owner.connect() as connection:
            await connection.execution_options(isolation_level="AUTOCOMMIT")
            database = make_url(owner_url(settings)).database
            await connection.execute(
                text(f'GRANT CONNECT ON DATABASE "{database}" TO {backup_role}')
            )
    finally:
        await owner.dispose()
    return await digest(owner_url(settings))


def measure(base: Settings, urls: dict[str, str], args: argparse.Namespace) -> None:
    if base.store.backup_database_url is None:
        raise SystemExit("set COGNIS_BACKUP_DATABASE_URL (docs/operations.md, The backup role)")
    settings = settings_on(base, urls)
    source = make_url(urls["migration_database_url"])
    backup_url = make_url(base.store.backup_database_url.get_secret_value()).set(
        database=source.database
    )
    rows, source_digest = asyncio.run(prepare(settings, args.memories, str(backup_url.username)))
    source_bytes = asyncio.run(database_bytes(urls["migration_database_url"]))
    restored = f"{source.database}_restored"
    restored_url = source.set(database=restored).render_as_string(hide_password=False)
    with tempfile.TemporaryDirectory(prefix="cognis-bench-backup-") as folder:
        dump = Path(folder) / "cognis.dump"
        try:
            backup_s, _ = run(
                [
                    "backup",
                    str(dump),
                    "--database-url",
                    backup_url.render_as_string(hide_password=False),
                ],
                environment(urls),
            )
            dump_bytes = dump.stat().st_size
            counts = json.loads(Path(f"{dump}.counts.json").read_text())
            restore_s, _ = run(["restore", str(dump), "--into", restored], environment(urls))
            restored_rows, restored_digest = asyncio.run(digest(restored_url))
            restored_bytes = asyncio.run(database_bytes(restored_url))
        finally:
            asyncio.run(scratch_database(owner_url(settings), restored, create=False))
    print(
        f"\n{rows:,} memory versions, {sum(counts.values()):,} rows in {len(counts)} tables"
        f" (memories {counts.get('memories', 0):,}, messages {counts.get('messages', 0):,},"
        f" ingest_decisions {counts.get('ingest_decisions', 0):,})"
    )
    print("| step | seconds | bytes |\n|---|---:|---:|")
    print(f"| database before (pg_database_size) | | {source_bytes:,} |")
    print(
        f"| `python -m app backup` (dump, counted, read back) | {backup_s:.1f} | {dump_bytes:,} |"
    )
    print(f"| `python -m app restore` (new database) | {restore_s:.1f} | {restored_bytes:,} |")
    print(f"dump bytes per memory version: {dump_bytes / max(rows, 1):,.0f}")
    same = rows == restored_rows and source_digest == restored_digest
    print(
        f"memories restored: {restored_rows:,} of {rows:,}; ids and 768D vectors"
        f" {'identical' if same else 'DIFFERENT'} (digest {restored_digest[:12]})"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=100_000, help="memory versions in all")
    parser.add_argument("--database", help="scratch database name (default: a new one)")
    args = parser.parse_args()
    base = Settings()
    configure_logging("WARNING", False)
    name = args.database or f"cognis_bench_backup_{uuid.uuid4().hex[:8]}"
    return in_scratch_database(base, name, lambda urls: measure(base, urls, args))


if __name__ == "__main__":
    sys.exit(main())
