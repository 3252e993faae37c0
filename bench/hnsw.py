"""Which HNSW indexes earn their cost: insert time per row and recall@10 for three layouts.

On a scratch table (created as the tables' owner, COGNIS_MIGRATION_DATABASE_URL, and dropped
afterwards) holding N LoCoMo turns embedded by the configured model:
- 256d:           the 256D HNSW index only (what the service has since migration 0005);
- 256d+768d:      plus a 768D HNSW index (the paper's second index, the service before 0004);
- 256d+768d-half: plus a 768D HNSW index on halfvec (half the index size).
Insert cost: rows inserted one statement each (as the service writes them), ms per row.
Recall@10 against exact 768D search for: the service's two-stage search (256D HNSW shortlist of
200, exact 768D re-score) and a direct 768D HNSW search (vector and halfvec).
Prints numbers; asserts nothing. Not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time

import numpy as np
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, create_async_engine

from app.config import Settings, get_settings
from app.ml.embedder import Embedder, Embedding
from bench.database import owner_url
from bench.foundation import locomo_turns_and_questions

TABLE = "bench_hnsw_scratch"
HNSW_256 = "CREATE INDEX ON {t} USING hnsw (e256 vector_cosine_ops) WITH (m=16,ef_construction=128)"
HNSW_768 = "CREATE INDEX ON {t} USING hnsw (e768 vector_cosine_ops) WITH (m=16,ef_construction=256)"
HNSW_768_HALF = (
    "CREATE INDEX ON {t} USING hnsw ((e768::halfvec(768)) halfvec_cosine_ops)"
    " WITH (m=16, ef_construction=256)"
)
LAYOUTS = {
    "256d": [HNSW_256],
    "256d+768d": [HNSW_256, HNSW_768],
    "256d+768d-half": [HNSW_256, HNSW_768_HALF],
}


def _literal(vector: np.ndarray) -> str:
    return "[" + ",".join(f"{x:.7f}" for x in vector) + "]"


async def _fresh_table(connection: AsyncConnection, layout: str) -> None:
    await connection.execute(text(f"DROP TABLE IF EXISTS {TABLE}"))
    await connection.execute(
        text(f"CREATE TABLE {TABLE} (id int PRIMARY KEY, e256 vector(256), e768 vector(768))")
    )
    for statement in LAYOUTS[layout]:
        await connection.execute(text(statement.format(t=TABLE)))


async def _insert_ms_per_row(
    connection: AsyncConnection, e256: list[str], e768: list[str]
) -> float:
    started = time.perf_counter()
    for i, (coarse, full) in enumerate(zip(e256, e768, strict=True)):
        await connection.execute(
            text(f"INSERT INTO {TABLE} VALUES (:i, CAST(:c AS vector), CAST(:f AS vector))"),
            {"i": i, "c": coarse, "f": full},
        )
    return (time.perf_counter() - started) * 1000 / len(e256)


async def _top10(connection: AsyncConnection, sql: str, **params: object) -> list[int]:
    return list((await connection.execute(text(sql), params)).scalars())


def embedded_turns(
    settings: Settings, rows: int, queries: int
) -> tuple[list[str], list[str], list[Embedding]]:
    """`rows` LoCoMo turns as 256D and 768D vector literals, and `queries` questions embedded,
    by the configured model in this process (the model service, `http`, serves the same
    weights)."""
    turns, questions = locomo_turns_and_questions(rows)
    backend = (
        "torch"
        if settings.embedding.embedding_backend == "http"
        else settings.embedding.embedding_backend
    )
    embedder = Embedder(settings.embedding.embedding_model, backend=backend)
    print(f"embedding {len(turns)} turns and {queries} questions...", flush=True)
    docs = embedder.embed_sync(turns)
    asked = embedder.embed_sync(questions[:queries])
    return [_literal(d.coarse) for d in docs], [_literal(d.full) for d in docs], asked


async def run(args: argparse.Namespace) -> None:
    settings = get_settings()
    e256, e768, queries = embedded_turns(settings, args.rows, args.queries)
    engine = create_async_engine(owner_url(settings))  # creates its own table
    try:
        async with engine.connect() as connection:
            await connection.execution_options(isolation_level="AUTOCOMMIT")
            await connection.execute(text("SET hnsw.ef_search = 200"))
            for layout in LAYOUTS:
                await _fresh_table(connection, layout)
                ms = await _insert_ms_per_row(connection, e256, e768)
                size = await connection.scalar(
                    text(f"SELECT pg_size_pretty(pg_indexes_size('{TABLE}'))")
                )
                print(f"{layout:15s} insert {ms:6.2f} ms/row, indexes {size}", flush=True)
            # Recall on the last table (all three kinds of index present, each query picks its own).
            await connection.execute(text(HNSW_768.format(t=TABLE)))
            recall = {"two-stage 256d->768d": 0.0, "768d hnsw": 0.0, "768d halfvec hnsw": 0.0}
            for query in queries:
                q256, q768 = _literal(query.coarse), _literal(query.full)
                await connection.execute(text("SET enable_indexscan = off"))
                exact = set(
                    await _top10(
                        connection,
                        f"SELECT id FROM {TABLE} ORDER BY e768 <=> CAST(:q AS vector) LIMIT 10",
                        q=q768,
                    )
                )
                await connection.execute(text("SET enable_indexscan = on"))
                two_stage = await _top10(
                    connection,
                    f"SELECT id FROM (SELECT id, e768 FROM {TABLE}"
                    " ORDER BY e256 <=> CAST(:c AS vector) LIMIT 200) s"
                    " ORDER BY e768 <=> CAST(:q AS vector) LIMIT 10",
                    c=q256,
                    q=q768,
                )
                direct = await _top10(
                    connection,
                    f"SELECT id FROM {TABLE} ORDER BY e768 <=> CAST(:q AS vector) LIMIT 10",
                    q=q768,
                )
                half = await _top10(
                    connection,
                    f"SELECT id FROM {TABLE} ORDER BY e768::halfvec(768) <=>"
                    " CAST(:q AS halfvec(768)) LIMIT 10",
                    q=q768,
                )
                for name, ids in zip(recall, (two_stage, direct, half), strict=True):
                    recall[name] += len(exact & set(ids)) / 10 / len(queries)
            for name, value in recall.items():
                print(f"recall@10 vs exact 768d, {name:22s} {value:.3f}", flush=True)
            await connection.execute(text(f"DROP TABLE IF EXISTS {TABLE}"))
    finally:
        await engine.dispose()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=3000)
    parser.add_argument("--queries", type=int, default=100)
    args = parser.parse_args()
    if "COGNIS_DATABASE_URL" not in os.environ:
        print("COGNIS_DATABASE_URL is not set (make bench-hnsw reads .local/cognis.env)")
        return 2
    asyncio.run(run(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
