"""Migration benchmark: every revision from the first to head on a database that holds many
memories, under a steady read/write load; per revision its wall time and the longest time any
statement held or waited for a lock that blocks reads or writes.

A scratch database (created by the owner, COGNIS_MIGRATION_DATABASE_URL, dropped at the end)
is migrated to the first revision and filled by direct SQL: --memories memories (zero vectors:
nothing here searches them, and pgvector's cosine HNSW indexes skip zero vectors, so loading is
cheap), a tenth as many messages and outbox rows. Then, while --clients connections read
(a user's current memories) and write (a memory and a message per loop, as the default tenant),
`alembic upgrade <next>` runs one revision at a time. Another connection samples pg_locks every
--sample-ms: a lock of the migration's session on a relation that existed before the revision,
in a mode that blocks writes (SHARE and above) or reads (ACCESS EXCLUSIVE), held or awaited,
counts from the first sample that saw it to the last (a gap of more than two samples starts a
new span: a migration that gave up on its lock_timeout and tries again). The load's own slowest
operation per revision is reported too (what a client felt). Target: <= 1 s per revision
(issue 20).

--long-reader-s S (issue 54): during each revision a report holds memories and messages (a
transaction that read both, ACCESS SHARE) from just before `alembic upgrade` starts until S
seconds past the process's start-up (a run with nothing to do, measured first). A migration
that needs ACCESS EXCLUSIVE on either waits behind it; with its short lock_timeout it gives up
and tries again (app/db/migration_locks.py), so the load's slowest read and write say how long
traffic stalled behind the migration's queued request (target: <= 1 s), and the wall time
includes the wait for the report.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import subprocess
import sys
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from app.config import Settings
from app.db.tenant import DEFAULT_TENANT_ID
from bench.database import owner_url, scratch_database

ROOT = Path(__file__).resolve().parent.parent
BLOCKING = {  # lock mode -> what it blocks
    "ShareLock": "writes",
    "ShareRowExclusiveLock": "writes",
    "ExclusiveLock": "writes",
    "AccessExclusiveLock": "reads and writes",
}
ZERO = "array_fill(0::real, ARRAY[{}])::vector"
USERS = 1000


@dataclass
class Revision:
    revision: str
    wall_s: float = 0.0
    longest_lock_s: float = 0.0
    lock: str = ""
    slowest_read_s: float = 0.0
    slowest_write_s: float = 0.0
    load_errors: int = 0
    ok: bool = True
    retries: int = 0  # tries the migration gave up on its lock_timeout
    before_oid: int = 0  # relations the revision creates have higher oids
    samples: dict[tuple[int, int, str], list[float]] = field(default_factory=dict, repr=False)


def chain() -> list[str]:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    config = Config(str(ROOT / "alembic.ini"))
    config.set_main_option("script_location", str(ROOT / "migrations"))
    scripts = ScriptDirectory.from_config(config)
    return [script.revision for script in reversed(list(scripts.walk_revisions()))]


async def alembic(url: str, revision: str) -> subprocess.CompletedProcess:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "alembic",
        "upgrade",
        revision,
        cwd=ROOT,
        env={**os.environ, "COGNIS_MIGRATION_DATABASE_URL": url},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    out, err = await process.communicate()
    return subprocess.CompletedProcess(
        [revision], process.returncode or 0, out.decode(), err.decode()
    )


async def fill(engine: AsyncEngine, memories: int, batch: int = 50_000) -> None:
    """The first revision's tables, filled by generate_series in batches of their own."""
    for start in range(0, memories, batch):
        stop = min(start + batch, memories)
        async with engine.begin() as connection:
            await connection.execute(
                text(
                    "INSERT INTO memories (id, user_id, chain_id, version, content, category,"
                    " embedding_768d, embedding_256d)"
                    " SELECT gen_random_uuid(), 'user-' || (g % :users), gen_random_uuid(), 1,"
                    f" 'memory number ' || g, 'travel', {ZERO.format(768)}, {ZERO.format(256)}"
                    " FROM generate_series(:start, :stop - 1) g"
                ),
                {"users": USERS, "start": start, "stop": stop},
            )
            await connection.execute(
                text(
                    "INSERT INTO messages (id, user_id, content, sent_at)"
                    " SELECT gen_random_uuid(), 'user-' || (g % :users), 'message ' || g, now()"
                    " FROM generate_series(:start, :stop - 1, 10) g"
                ),
                {"users": USERS, "start": start, "stop": stop},
            )
            await connection.execute(
                text(
                    "INSERT INTO outbox (user_id, op, memory_id, processed_at)"
                    " SELECT 'user-' || (g % :users), 'index', gen_random_uuid(), now()"
                    " FROM generate_series(:start, :stop - 1, 10) g"
                ),
                {"users": USERS, "start": start, "stop": stop},
            )
    async with engine.connect() as connection:
        await connection.execution_options(isolation_level="AUTOCOMMIT")
        await connection.execute(text("VACUUM ANALYZE"))


class Load:
    """--clients connections, each reading a user's current memories and writing a memory and a
    message, in a loop; the slowest read and write since the last `take()`."""

    def __init__(self, engine: AsyncEngine, clients: int) -> None:
        self.engine, self.clients = engine, clients
        self.stop = asyncio.Event()
        self.slowest = {"read": 0.0, "write": 0.0}
        self.errors = 0
        self.pids: set[int] = set()

    def take(self) -> tuple[float, float, int]:
        taken = (self.slowest["read"], self.slowest["write"], self.errors)
        self.slowest, self.errors = {"read": 0.0, "write": 0.0}, 0
        return taken

    async def _timed(self, kind: str, connection: AsyncConnection, sql: str, **params: object):
        start = time.perf_counter()
        try:
            async with connection.begin():
                await connection.execute(text(sql), params)
        except Exception:  # counted: a load error is a result, not a crash
            self.errors += 1
        self.slowest[kind] = max(self.slowest[kind], time.perf_counter() - start)

    async def _client(self, n: int) -> None:
        async with self.engine.connect() as connection:
            pid: int = (await connection.execute(text("SELECT pg_backend_pid()"))).scalar_one()
            # Session-wide: the tenant of what it writes, once 0007_tenants has added tenants.
            await connection.execute(
                text("SELECT set_config('cognis.tenant_id', :t, false)"),
                {"t": str(DEFAULT_TENANT_ID)},
            )
            await connection.commit()
            self.pids.add(pid)
            i = 0
            while not self.stop.is_set():
                i += 1
                user = f"user-{(n * 7919 + i) % USERS}"
                await self._timed(
                    "read",
                    connection,
                    "SELECT id, content FROM memories WHERE user_id = :u AND is_current LIMIT 10",
                    u=user,
                )
                await self._timed(
                    "write",
                    connection,
                    "INSERT INTO memories (id, user_id, chain_id, version, content, category,"
                    " embedding_768d, embedding_256d) VALUES (gen_random_uuid(), :u,"
                    f" gen_random_uuid(), 1, 'load', 'travel', {ZERO.format(768)},"
                    f" {ZERO.format(256)})",
                    u=user,
                )
                await self._timed(
                    "write",
                    connection,
                    "INSERT INTO messages (id, user_id, content, sent_at)"
                    " VALUES (gen_random_uuid(), :u, 'load', now())",
                    u=user,
                )
                await asyncio.sleep(0.01)

    async def run(self) -> None:
        await asyncio.gather(*(self._client(n) for n in range(self.clients)))


async def sample_locks(
    engine: AsyncEngine, load: Load, current: list[Revision], every_s: float, stop: asyncio.Event
) -> None:
    """Every `every_s`: the blocking locks of sessions other than the load's and this one's on
    relations that existed before the running revision began."""
    async with engine.connect() as connection:
        await connection.execution_options(isolation_level="AUTOCOMMIT")
        me: int = (await connection.execute(text("SELECT pg_backend_pid()"))).scalar_one()
        while not stop.is_set():
            revision = current[-1] if current else None
            rows = (
                await connection.execute(
                    text(
                        "SELECT l.pid, l.relation::int, l.mode, l.relation::regclass::text"
                        " FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
                        " WHERE l.locktype = 'relation' AND l.database = ("
                        "   SELECT oid FROM pg_database WHERE datname = current_database())"
                        " AND l.mode = ANY(:modes) AND l.pid <> ALL(:skip)"
                        " AND l.relation::int <= :before"
                    ),
                    {
                        "modes": list(BLOCKING),
                        "skip": [me, *load.pids],
                        "before": revision.before_oid if revision else 0,
                    },
                )
            ).all()
            now = time.perf_counter()
            if revision is not None:
                for row in rows:
                    pid, relation, mode, name = row
                    key = (int(pid), int(relation), f"{mode} {name}")
                    revision.samples.setdefault(key, []).append(now)
            await asyncio.sleep(every_s)


async def max_oid(engine: AsyncEngine) -> int:
    """The highest relation oid so far: relations the next revision creates come above it (oids
    of a fresh scratch database grow; wraparound is out of reach of a benchmark)."""
    async with engine.connect() as connection:
        found = await connection.execute(text("SELECT max(oid)::int FROM pg_class"))
        return int(found.scalar_one())


def spans(seen: list[float], sample_s: float) -> list[float]:
    """Runs of samples with no gap over two intervals (plus slack for a slow sampler), each
    from its first sample to its last plus one interval."""
    runs, start = [], seen[0]
    for before, after in itertools.pairwise(seen):
        if after - before > 2.5 * sample_s + 0.05:
            runs.append(before - start + sample_s)
            start = after
    runs.append(seen[-1] - start + sample_s)
    return runs


def longest(revision: Revision, sample_s: float) -> None:
    for (_, _, what), seen in revision.samples.items():
        # Seen in k consecutive samples: held for at least (k - 1) intervals, at most k + 1.
        held = max(spans(seen, sample_s))
        if held > revision.longest_lock_s:
            revision.longest_lock_s, revision.lock = held, what


async def long_reader(engine: AsyncEngine, load: Load, hold_s: float) -> None:
    """A report: one transaction that reads memories and messages, then holds them."""
    async with engine.connect() as connection:
        pid = (await connection.execute(text("SELECT pg_backend_pid()"))).scalar_one()
        load.pids.add(pid)  # its ACCESS SHARE locks are not the migration's
        await connection.execute(text("SELECT count(*) FROM memories"))
        await connection.execute(text("SELECT count(*) FROM messages"))
        await asyncio.sleep(hold_s)
        await connection.rollback()


async def bench(args: argparse.Namespace) -> list[Revision]:
    settings = Settings()
    base = owner_url(settings)
    name = f"cognis_bench_migrations_{uuid.uuid4().hex[:8]}"
    url = make_url(base).set(database=name).render_as_string(hide_password=False)
    revisions = chain()
    await scratch_database(base, name, create=True)
    engine = create_async_engine(url, pool_size=args.clients + 3)
    results: list[Revision] = []
    try:
        first = await alembic(url, revisions[0])
        if first.returncode != 0:
            raise SystemExit(first.stderr[-3000:])
        started = time.perf_counter()
        await alembic(url, revisions[0])  # nothing to do: the process's own start-up
        startup = time.perf_counter() - started
        print(f"alembic start-up (a run with nothing to do): {startup:.2f} s")
        started = time.perf_counter()
        await fill(engine, args.memories)
        print(f"filled {args.memories} memories in {time.perf_counter() - started:.0f} s")
        measured = revisions[1:]
        if args.from_revision:  # unmeasured, before the load starts
            started = time.perf_counter()
            if (done := await alembic(url, args.from_revision)).returncode != 0:
                raise SystemExit(done.stderr[-3000:])
            print(f"upgraded to {args.from_revision} in {time.perf_counter() - started:.0f} s")
            measured = revisions[revisions.index(args.from_revision) + 1 :]
        load = Load(engine, args.clients)
        loading = asyncio.create_task(load.run())
        stop = asyncio.Event()
        current: list[Revision] = []
        sampler = asyncio.create_task(
            sample_locks(engine, load, current, args.sample_ms / 1000, stop)
        )
        await asyncio.sleep(2)  # the load in its stride
        load.take()
        for revision in measured:
            result = Revision(revision)
            result.before_oid = await max_oid(engine)
            current.append(result)
            reader = None
            if args.long_reader_s:
                # Past the alembic process's start-up: the report outlasts its first statement.
                hold = startup + args.long_reader_s
                reader = asyncio.create_task(long_reader(engine, load, hold))
                await asyncio.sleep(0.2)  # its locks taken
            started = time.perf_counter()
            done = await alembic(url, revision)
            result.wall_s = time.perf_counter() - started
            result.retries = done.stderr.count("passed waiting for a lock")
            if reader is not None:
                await reader
            await asyncio.sleep(args.sample_ms / 1000)
            result.ok = done.returncode == 0
            result.slowest_read_s, result.slowest_write_s, result.load_errors = load.take()
            longest(result, args.sample_ms / 1000)
            results.append(result)
            print(
                f"{revision}: {result.wall_s:.2f} s, lock {result.longest_lock_s:.2f} s"
                f" {result.lock}",
                flush=True,
            )
            if not result.ok:
                print(done.stderr[-3000:])
                break
        stop.set()
        load.stop.set()
        await asyncio.gather(sampler, loading)
    finally:
        await engine.dispose()
        if not args.keep:
            await scratch_database(base, name, create=False)
    return results


def table(results: list[Revision], memories: int) -> str:
    lines = [
        f"{memories:,} memories at the first revision.",
        "",
        "| revision | wall time (s) | longest blocking lock (s) | lock | slowest read (s) "
        "| slowest write (s) | load errors | lock retries |",
        "|---|---:|---:|---|---:|---:|---:|---:|",
    ]
    for r in results:
        lock = r.lock or "none seen"
        lines.append(
            f"| `{r.revision}`{'' if r.ok else ' (failed)'} | {r.wall_s:.2f} "
            f"| {r.longest_lock_s:.2f} | {lock} | {r.slowest_read_s:.2f} "
            f"| {r.slowest_write_s:.2f} | {r.load_errors} | {r.retries} |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=1_000_000)
    parser.add_argument("--clients", type=int, default=4, help="load connections")
    parser.add_argument("--sample-ms", type=int, default=50)
    parser.add_argument(
        "--long-reader-s",
        type=float,
        default=0.0,
        help="a report holds memories and messages this long during each revision (0: none)",
    )
    parser.add_argument(
        "--from-revision",
        help="after the fill, upgrade to this revision unmeasured, then measure each after it",
    )
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--keep", action="store_true", help="keep the scratch database")
    args = parser.parse_args()
    results = asyncio.run(bench(args))
    print(table(results, args.memories))
    if args.json:
        args.json.write_text(
            json.dumps(
                [{k: v for k, v in asdict(r).items() if k != "samples"} for r in results],
                indent=2,
            )
        )
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
