"""Analysts' queries before and after the indexes that lead with tenant_id (migration
0037_tenant_indexes, issue 42): EXPLAIN ANALYZE as real login roles bound to a tenant.

A scratch database (created by the owner on its server, dropped at the end) is migrated to
the revision before 0037 and filled by SQL (bench/synthetic.py): one big tenant (the default
one, --big-share of the memory versions) and --small-tenants small ones sharing the rest,
each with users of the same ids (user-0, user-1, ...: user ids are unique within a tenant
only), 50 memories of 4 versions each (one chain in 20 deleted), 100 messages, a decision per
version, over a year. Two analysts are made as docs/deployment.md says (a login role in
cognis_analyst, bound in analyst_tenants): one of a small tenant, one of the big one. Each
runs docs/analysts.md's queries and a few more of its kind, --runs times after a warm-up;
then `alembic upgrade 0037_tenant_indexes` builds the indexes (timed) and they run again.
Per query and analyst: median execution time, shared buffers touched, and the scan the plan
chose. The roles are dropped at the end. Prints numbers; asserts nothing.

    make bench-analyst BENCH_ARGS="--versions 300000"
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import uuid
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import NullPool

from app.config import Settings
from app.db.tenant import DEFAULT_TENANT_ID
from app.logging import configure_logging
from bench.database import measure_in_scratch_database, migrate, owner_engine, owner_url
from bench.synthetic import Users, fill

BEFORE = "0036_webhook_dispatch"
AFTER = "0037_tenant_indexes"
QUERIES = {
    "deleted in the last week (docs)": (
        "SELECT user_id, content, valid_to AS deleted_at FROM memory_versions"
        " WHERE status = 'deleted' AND valid_to > now() - interval '7 days'"
    ),
    "memories written per day, 30 days": (
        "SELECT date_trunc('day', created_at) AS day, count(*) FROM memories"
        " WHERE created_at > now() - interval '30 days' GROUP BY 1 ORDER BY 1"
    ),
    "current memories per category": (
        "SELECT category, count(*) FROM current_memories GROUP BY 1 ORDER BY 2 DESC"
    ),
    "versions in the tenant": "SELECT count(*) FROM memories",
    "decisions per day, 30 days": (
        "SELECT date_trunc('day', created_at) AS day, count(*) FROM ingest_decisions"
        " WHERE created_at > now() - interval '30 days' GROUP BY 1 ORDER BY 1"
    ),
    "a user's current memories (docs)": (
        "SELECT content, category, scope, created_at FROM current_memories"
        " WHERE user_id = 'user-3' ORDER BY created_at DESC"
    ),
}
TABLES = ("memories", "ingest_decisions")


def _scans(node: dict[str, Any], found: list[str]) -> list[str]:
    """The scans of the filled tables and their indexes in a plan, as 'Seq Scan memories' or
    'Bitmap Index Scan <index>'."""
    index = node.get("Index Name", "")
    if node.get("Relation Name") in TABLES or index.startswith(TABLES):
        found.append(f"{node['Node Type']} {index or node['Relation Name']}")
    for child in node.get("Plans", []):
        _scans(child, found)
    return found


async def explain(engine: AsyncEngine, sql: str, runs: int) -> tuple[float, int, str]:
    """Median execution ms over `runs` (after one warm-up), shared buffers, the scans."""
    times: list[float] = []
    plan: dict[str, Any] = {}
    async with engine.connect() as connection:
        for _ in range(runs + 1):
            raw: Any = (
                await connection.execute(text(f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {sql}"))
            ).scalar_one()
            plan = (json.loads(raw) if isinstance(raw, str) else raw)[0]
            times.append(float(plan["Execution Time"]))
        await connection.rollback()
    top = plan["Plan"]
    buffers = int(top.get("Shared Hit Blocks", 0)) + int(top.get("Shared Read Blocks", 0))
    return statistics.median(times[1:]), buffers, ", ".join(sorted(set(_scans(top, []))))


def role_admin() -> AsyncEngine | None:
    """Who makes logins: the owner has no CREATEROLE (issue 53), so the local role admin
    (COGNIS_TEST_ROLE_ADMIN_URL in .local/cognis.env); None: the owner, as before."""
    url = os.environ.get("COGNIS_TEST_ROLE_ADMIN_URL")
    return create_async_engine(url, poolclass=NullPool) if url else None


async def analyst(owner: AsyncEngine, base_url: str, tenant_id: uuid.UUID) -> tuple[str, str]:
    """A login role bound to `tenant_id`, made as docs/deployment.md makes one; its URL."""
    role = f"bench_analyst_{uuid.uuid4().hex[:8]}"
    password = uuid.uuid4().hex
    admin = role_admin() or owner
    async with admin.begin() as connection:
        await connection.execute(
            text(f"CREATE ROLE {role} LOGIN PASSWORD '{password}' IN ROLE cognis_analyst")
        )
    if admin is not owner:
        await admin.dispose()
    async with owner.begin() as connection:
        await connection.execute(
            text("INSERT INTO analyst_tenants (role_name, tenant_id) VALUES (:r, :t)"),
            {"r": role, "t": tenant_id},
        )
    url = make_url(base_url).set(username=role, password=password)
    return role, url.render_as_string(hide_password=False)


async def drop_roles(owner: AsyncEngine, roles: list[str]) -> None:
    for role in roles:
        async with owner.begin() as connection:
            # Unbinding revokes its CONNECT (0023's trigger): nothing of it is left to drop.
            await connection.execute(
                text("DELETE FROM analyst_tenants WHERE role_name = :r"), {"r": role}
            )
            database = connection.engine.url.database
            await connection.execute(text(f'REVOKE ALL ON DATABASE "{database}" FROM {role}'))
    admin = role_admin() or owner
    try:
        async with admin.begin() as connection:
            for role in roles:
                await connection.execute(text(f"DROP ROLE IF EXISTS {role}"))
    finally:
        if admin is not owner:
            await admin.dispose()


def shape(versions: int, big_share: float, small_tenants: int) -> list[Users]:
    per_user = 50 * 4
    big = int(versions * big_share) // per_user
    small = int(versions * (1 - big_share)) // max(small_tenants, 1) // per_user
    groups = [Users(DEFAULT_TENANT_ID, "user-", big, 50, 4, 100)]
    for n in range(small_tenants):
        tenant = uuid.UUID(int=0xA11A_0000 + n)
        groups.append(Users(tenant, "user-", max(small, 1), 50, 4, 100))
    return groups


async def measure(settings: Settings, urls: dict[str, str], args: argparse.Namespace) -> None:
    owner = owner_engine(settings)
    roles: list[str] = []
    engines: dict[str, AsyncEngine] = {}
    try:
        groups = shape(args.versions, args.big_share, args.small_tenants)
        total = sum(g.memory_versions for g in groups)
        print(
            f"filling {total:,} memory versions: the big tenant {groups[0].memory_versions:,},"
            f" {len(groups) - 1} small ones {groups[-1].memory_versions:,} each",
            flush=True,
        )
        await fill(owner, groups, vectors="zero", progress=lambda s: print(s, flush=True))
        for label, group in (("small tenant", groups[-1]), ("big tenant", groups[0])):
            role, url = await analyst(owner, owner_url(settings), group.tenant_id)
            roles.append(role)
            engines[f"{label} ({group.memory_versions:,} versions)"] = create_async_engine(
                url, poolclass=NullPool
            )
        results: dict[tuple[str, str], list[tuple[float, int, str]]] = {}
        for stage in ("before", "after"):
            if stage == "after":
                started = time.perf_counter()
                if not migrate(urls, AFTER):
                    raise SystemExit(1)
                print(f"alembic upgrade {AFTER}: {time.perf_counter() - started:.1f} s")
                async with owner.connect() as connection:
                    await connection.execution_options(isolation_level="AUTOCOMMIT")
                    for table in TABLES:
                        await connection.execute(text(f"ANALYZE {table}"))
            for who, engine in engines.items():
                for name, sql in QUERIES.items():
                    result = await explain(engine, sql, args.runs)
                    results.setdefault((who, name), []).append(result)
                    print(
                        f"  {stage} | {who} | {name}: {result[0]:.1f} ms, {result[2]}", flush=True
                    )
        print(
            "\n| analyst | query | before (ms) | after (ms) | buffers before | buffers after"
            " | plan before | plan after |\n|---|---|---:|---:|---:|---:|---|---|"
        )
        for (who, name), ((t0, b0, p0), (t1, b1, p1)) in results.items():
            print(f"| {who} | {name} | {t0:.1f} | {t1:.1f} | {b0} | {b1} | {p0} | {p1} |")
    finally:
        for engine in engines.values():
            await engine.dispose()
        await drop_roles(owner, roles)
        await owner.dispose()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--versions", type=int, default=300_000, help="memory versions in all")
    parser.add_argument("--big-share", type=float, default=0.9, help="the big tenant's share")
    parser.add_argument("--small-tenants", type=int, default=9)
    parser.add_argument("--runs", type=int, default=3, help="runs per query (median)")
    parser.add_argument("--database", help="scratch database name (default: a new one)")
    args = parser.parse_args()
    base = Settings()
    configure_logging("WARNING", False)

    name = args.database or f"cognis_bench_analyst_{uuid.uuid4().hex[:8]}"
    return measure_in_scratch_database(
        base, name, lambda settings, urls: measure(settings, urls, args), revision=BEFORE
    )


if __name__ == "__main__":
    sys.exit(main())
