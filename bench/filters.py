"""Filtered vector search: recall@10 against an exact filtered scan, and latency filtered vs
unfiltered, at filter selectivities of 50 %, 10 %, 1 % and 0.1 % of one user's memories.

Runs in a scratch database (created by the owner, COGNIS_MIGRATION_DATABASE_URL, migrated
with Alembic, dropped at the end). One queried user with N synthetic memories (bench.scale's
SyntheticMemories: vectors in the model's own space) among other users, loaded with the HNSW
index dropped and rebuilt after. Each memory carries `metadata.b` = its number mod 1000, so
`{"field": "metadata.b", "op": "lt", "value": k}` keeps k/1000 of them: a metadata clause, the
kind no index serves (the worst case for the planner).

Timed: the vector leg exactly as a search runs it (app/memories/repository.py: the count that
chooses the scan, the 256D shortlist of COGNIS_CANDIDATES_256D, the exact 768D re-score), in
two modes: `auto` (the service's choice: exact scan when at most
COGNIS_EXACT_SEARCH_MAX_MEMORIES memories match, else HNSW with iterative scans) and `hnsw`
(always the index: what the choice avoids). Reference: the exact top 10 by 768D cosine over
every matching memory (`recall@10`), and the same two stages run as an exact scan over every
matching memory (`vs scan`: what the index's approximation costs, apart from the 256D
shortlist's own, which an unfiltered search has too). The BM25 leg needs no figure here:
OpenSearch applies a column clause exactly, in the query, and ranks only what matches
(app/memories/filters.py).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
import uuid

import numpy as np
from pydantic import SecretStr
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from app.config import Settings
from app.db.engine import create_engine
from app.db.tenant import DEFAULT_TENANT_ID, tenant_scope
from app.db.vector_indexes import build_hnsw_indexes, drop_hnsw_indexes
from app.logging import configure_logging
from app.memories.filters import parse_filter, to_sql
from app.memories.repository import MemoryRepository
from bench.database import in_scratch_database, owner_url
from bench.foundation import percentile
from bench.scale import SyntheticMemories, vacuum_analyze, word_vectors

SELECTIVITIES = (0.5, 0.1, 0.01, 0.001)

INSERT = text(
    """
    INSERT INTO memories (id, user_id, chain_id, version, content, category, scope,
                          is_current, metadata, embedding_768d, embedding_256d)
    SELECT id, CAST(:user_id AS text), id, 1, content, 'preferences', 'USER', true,
           jsonb_build_object('b', b), CAST(e AS vector),
           l2_normalize(subvector(CAST(e AS vector), 1, 256))
    FROM unnest(CAST(:ids AS uuid[]), CAST(:contents AS text[]), CAST(:buckets AS int[]),
                CAST(:vectors AS text[])) AS t(id, content, b, e)
    """
)
EXACT = text(
    """
    SELECT id FROM memories
    WHERE user_id = :user_id AND is_current AND (metadata->>'b')::int < :below
    ORDER BY embedding_768d <=> CAST(:query AS vector) LIMIT 10
    """
)


async def load(engine, memories: SyntheticMemories, user_id: str, count: int) -> None:
    chunk = 2000
    for first in range(0, count, chunk):
        n = min(chunk, count - first)
        contents, vectors = memories.batch(first, n)
        with tenant_scope(DEFAULT_TENANT_ID):
            async with AsyncSession(engine) as session, session.begin():
                await session.execute(
                    text("SELECT set_config('cognis.tenant_id', :t, true)"),
                    {"t": str(DEFAULT_TENANT_ID)},
                )
                await session.execute(
                    INSERT,
                    {
                        "ids": [uuid.uuid4() for _ in range(n)],
                        "contents": contents,
                        "buckets": [(first + i) % 1000 for i in range(n)],
                        "vectors": ["[" + ",".join(map(repr, v.tolist())) + "]" for v in vectors],
                        "user_id": user_id,
                    },
                )


async def vector_leg(
    session: AsyncSession, settings: Settings, user_id: str, query: np.ndarray, where, exact_max
) -> list[uuid.UUID]:
    """Stage 2 as legs.py runs it (without the feedback lever): shortlist, 768D re-score."""
    repository = MemoryRepository(session, where)
    coarse = await repository.coarse_candidates(
        user_id,
        query[:256] / np.linalg.norm(query[:256]),
        None,
        settings.candidates_256d,
        settings.hnsw_ef_search,
        exact_max,
    )
    exact = await repository.exact_768d_scores(user_id, [i for i, _ in coarse], query)
    return [i for i, _ in sorted(exact.items(), key=lambda pair: -pair[1])[:10]]


async def measure(settings: Settings, args: argparse.Namespace) -> None:
    engine = create_engine(settings, owner_url(settings))
    request_engine = create_engine(settings, settings.database_url.get_secret_value())
    memories = SyntheticMemories(word_vectors())
    rng = np.random.default_rng(11)
    target = "filters-target"
    try:
        await drop_hnsw_indexes(engine)
        for number in range(args.other_users):
            await load(engine, memories, f"filters-other-{number}", args.other_size)
        await load(engine, memories, target, args.size)
        started = time.perf_counter()
        await build_hnsw_indexes(engine)
        await vacuum_analyze(engine)
        print(
            f"== {args.size} memories for the queried user, {args.other_users} other users x "
            f"{args.other_size}; HNSW built in {time.perf_counter() - started:.0f} s; "
            f"{args.queries} queries; exact_max {settings.exact_search_max_memories}, "
            f"ef_search {settings.hnsw_ef_search}, shortlist {settings.candidates_256d}",
            flush=True,
        )
        _, queries = memories.batch(10_000_000, args.queries)
        queries = queries + rng.normal(0, 0.3 / np.sqrt(queries.shape[1]), queries.shape)
        queries /= np.linalg.norm(queries, axis=1, keepdims=True)
        cases: list[tuple[str, float | None]] = [("none", None)] + [
            ("metadata.b", s) for s in SELECTIVITIES
        ]
        print(
            f"{'filter':>12} {'mode':>5} {'recall@10':>9} {'vs scan':>8} {'p50 ms':>7} "
            f"{'p95 ms':>7}"
        )
        for _, selectivity in cases:
            below = 1000 if selectivity is None else max(1, round(selectivity * 1000))
            where = (
                None
                if selectivity is None
                else to_sql(parse_filter({"field": "metadata.b", "op": "lt", "value": below}))
            )
            for mode, exact_max in (("auto", settings.exact_search_max_memories), ("hnsw", 0)):
                recalls, leg_recalls, timings = [], [], []
                for query in queries:
                    vector = "[" + ",".join(map(repr, query.tolist())) + "]"
                    with tenant_scope(DEFAULT_TENANT_ID):
                        async with AsyncSession(request_engine) as session, session.begin():
                            await session.execute(
                                text("SELECT set_config('cognis.tenant_id', :t, true)"),
                                {"t": str(DEFAULT_TENANT_ID)},
                            )
                            t0 = time.perf_counter()
                            found = await vector_leg(
                                session, settings, target, query, where, exact_max
                            )
                            timings.append((time.perf_counter() - t0) * 1000)
                            truth = [
                                r.id
                                for r in await session.execute(
                                    EXACT, {"user_id": target, "below": below, "query": vector}
                                )
                            ]
                            # The same two stages over every matching memory, no index.
                            scanned = await vector_leg(
                                session, settings, target, query, where, 10**9
                            )
                    recalls.append(len(set(found) & set(truth)) / max(1, len(truth)))
                    leg_recalls.append(len(set(found) & set(scanned)) / max(1, len(scanned)))
                label = "none" if selectivity is None else f"{selectivity:.1%}"
                print(
                    f"{label:>12} {mode:>5} {np.mean(recalls):9.3f} {np.mean(leg_recalls):8.3f} "
                    f"{percentile(timings, 50):7.2f} {percentile(timings, 95):7.2f}",
                    flush=True,
                )
    finally:
        await request_engine.dispose()
        await engine.dispose()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", type=int, default=10_000, help="the queried user's memories")
    parser.add_argument("--other-users", type=int, default=20)
    parser.add_argument("--other-size", type=int, default=1000)
    parser.add_argument("--queries", type=int, default=100)
    args = parser.parse_args()
    base = Settings()
    configure_logging("WARNING", False)

    def work(scratch_urls: dict[str, str]) -> None:
        settings = base.model_copy(
            update={field: SecretStr(url) for field, url in scratch_urls.items()}
        )
        asyncio.run(measure(settings, args))

    return in_scratch_database(base, f"cognis_bench_filters_{uuid.uuid4().hex[:8]}", work)


if __name__ == "__main__":
    sys.exit(main())
