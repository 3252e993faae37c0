"""The 256D HNSW graph and superseded versions: the whole table against current versions only.

Every search reads current versions only, yet until migration 0025 the 256D HNSW index held
every version, so a history-heavy user's graph was mostly versions no search may return: a
filtered scan walks past them (and gives up after pgvector's `hnsw.max_scan_tuples`), each
superseding update added an entry, and the index grew with the history.

On a scratch table (created as the tables' owner and dropped afterwards) of N LoCoMo turns
embedded by the configured model, one in `--versions` of them current (the others stand for
superseded versions), for each layout: index size, build time, and recall@10 of the service's
two-stage search (256D shortlist of 200 through the index, `hnsw.ef_search` and relaxed
iterative scans as the service sets them, re-scored exactly in 768D) against an exact 768D
search, over current versions only. Prints numbers; asserts nothing. Not a test.

    make bench-hnsw-history BENCH_ARGS="--rows 3000 --versions 8"
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, create_async_engine

from app.config import get_settings
from bench.database import owner_url
from bench.hnsw import _literal, _top10, embedded_turns

TABLE = "bench_hnsw_history_scratch"
INDEX = (
    "CREATE INDEX {t}_e256 ON {t} USING hnsw (e256 vector_cosine_ops)"
    " WITH (m=16, ef_construction=128)"
)
LAYOUTS = {
    "every version (before 0025)": INDEX,
    "current versions (0025)": INDEX + " WHERE is_current",
}
TWO_STAGE = (
    f"SELECT id FROM (SELECT id, e768 FROM {TABLE} WHERE is_current"
    " ORDER BY e256 <=> CAST(:c AS vector) LIMIT 200) s"
    " ORDER BY e768 <=> CAST(:q AS vector) LIMIT 10"
)
EXACT = (
    f"SELECT id FROM {TABLE} WHERE is_current ORDER BY (e768 <=> CAST(:q AS vector)) + 0 LIMIT 10"
)


async def _load(connection: AsyncConnection, e256: list[str], e768: list[str], every: int) -> int:
    await connection.execute(text(f"DROP TABLE IF EXISTS {TABLE}"))
    await connection.execute(
        text(
            f"CREATE TABLE {TABLE} (id int PRIMARY KEY, is_current boolean NOT NULL,"
            " e256 vector(256), e768 vector(768))"
        )
    )
    for i, (coarse, full) in enumerate(zip(e256, e768, strict=True)):
        await connection.execute(
            text(f"INSERT INTO {TABLE} VALUES (:i, :cur, CAST(:c AS vector), CAST(:f AS vector))"),
            {"i": i, "cur": i % every == 0, "c": coarse, "f": full},
        )
    await connection.execute(text(f"ANALYZE {TABLE}"))
    return (len(e256) + every - 1) // every


async def run(args: argparse.Namespace) -> None:
    settings = get_settings()
    e256, e768, queries = embedded_turns(settings, args.rows, args.queries)
    engine = create_async_engine(owner_url(settings))
    try:
        async with engine.connect() as connection:
            await connection.execution_options(isolation_level="AUTOCOMMIT")
            current = await _load(connection, e256, e768, args.versions)
            print(f"{len(e256)} versions, {current} current", flush=True)
            for layout, statement in LAYOUTS.items():
                await connection.execute(text(f"DROP INDEX IF EXISTS {TABLE}_e256"))
                started = time.perf_counter()
                await connection.execute(text(statement.format(t=TABLE)))
                built = time.perf_counter() - started
                size = await connection.scalar(
                    text(f"SELECT pg_size_pretty(pg_relation_size('{TABLE}_e256'))")
                )
                await connection.execute(
                    text(f"SET hnsw.ef_search = {settings.retrieval.hnsw_ef_search}")
                )
                await connection.execute(text("SET hnsw.iterative_scan = relaxed_order"))
                recall = 0.0
                for query in queries:
                    q256, q768 = _literal(query.coarse), _literal(query.full)
                    exact = set(await _top10(connection, EXACT, q=q768))
                    found = await _top10(connection, TWO_STAGE, c=q256, q=q768)
                    recall += len(exact & set(found)) / max(len(exact), 1) / len(queries)
                print(
                    f"{layout:28s} index {size:>8s}, built in {built:5.1f} s, "
                    f"two-stage recall@10 {recall:.3f}",
                    flush=True,
                )
            await connection.execute(text(f"DROP TABLE IF EXISTS {TABLE}"))
    finally:
        await engine.dispose()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=3000, help="versions in all")
    parser.add_argument("--versions", type=int, default=8, help="versions per current one")
    parser.add_argument("--queries", type=int, default=100)
    args = parser.parse_args()
    if "COGNIS_DATABASE_URL" not in os.environ:
        print("COGNIS_DATABASE_URL is not set (make bench-hnsw-history reads .local/cognis.env)")
        return 2
    asyncio.run(run(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
