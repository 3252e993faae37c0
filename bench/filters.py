"""Filtered vector search: recall@10 against an exact filtered scan, and latency filtered vs
unfiltered, at filter selectivities of 50 %, 10 %, 1 % and 0.1 % of one user's memories.

Runs in a scratch database (created by the owner, COGNIS_MIGRATION_DATABASE_URL, migrated
with Alembic, dropped at the end). One queried user with N synthetic memories (bench.scale's
SyntheticMemories: vectors in the model's own space) among other users, loaded with the HNSW
index dropped and rebuilt after. Each memory carries `metadata.b` = its number mod 1000, so
`{"field": "metadata.b", "op": "lt", "value": k}` keeps k/1000 of them: a metadata clause, the
kind no index serves (the worst case for the planner).

Timed: the vector leg exactly as a search runs it (app/memories/vectors.py: the count that
chooses the scan, the 256D shortlist of COGNIS_CANDIDATES_256D, the exact 768D re-score), in
two modes: `auto` (the service's choice: exact scan when at most
COGNIS_EXACT_SEARCH_MAX_MEMORIES memories match, else HNSW with iterative scans) and `hnsw`
(always the index: what the choice avoids). Reference: the exact top 10 by 768D cosine over
every matching memory (`recall@10`), and the same two stages run as an exact scan over every
matching memory (`vs scan`: what the index's approximation costs, apart from the 256D
shortlist's own, which an unfiltered search has too). The BM25 leg needs no figure here:
OpenSearch applies a column clause exactly, in the query, and ranks only what matches
(app/memories/filters/).
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid

import numpy as np
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from app.config import Settings
from app.db.engine import create_engine
from app.db.tenant import DEFAULT_TENANT_ID, tenant_scope
from app.db.vector_indexes import build_hnsw_indexes, drop_hnsw_indexes
from app.logging import configure_logging
from app.memories.filters import parse_filter, to_sql
from app.memories.repository import MemoryRepository
from bench.database import measure_in_scratch_database, owner_url
from bench.foundation import percentile
from bench.scale import (
    LocomoMemories,
    Memories,
    SyntheticMemories,
    vacuum_analyze,
    word_vectors,
)

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


async def load(engine, memories: Memories, user_id: str, count: int) -> None:
    chunk = 2000
    for first in range(0, count, chunk):
        n = min(chunk, count - first)
        contents, vectors, _ = memories.batch(first, n)
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
    session: AsyncSession,
    settings: Settings,
    user_id: str,
    query: np.ndarray,
    where,
    exact_max: int,
    shortlist: int,
) -> list[uuid.UUID]:
    """Stage 2 as legs.py runs it (without the feedback lever): shortlist, 768D re-score."""
    repository = MemoryRepository(session, where)
    coarse = await repository.coarse_candidates(
        user_id,
        query[:256] / np.linalg.norm(query[:256]),
        None,
        shortlist,
        settings.retrieval.hnsw_ef_search,
        exact_max,
    )
    exact = await repository.exact_768d_scores(user_id, [i for i, _ in coarse], query)
    return [i for i, _ in sorted(exact.items(), key=lambda pair: -pair[1])[:10]]


async def loaded(engine, user_id: str) -> int:
    async with AsyncSession(engine) as session, session.begin():
        await session.execute(
            text("SELECT set_config('cognis.tenant_id', :t, true)"), {"t": str(DEFAULT_TENANT_ID)}
        )
        count = await session.scalar(
            text("SELECT count(*) FROM memories WHERE user_id = :u"), {"u": user_id}
        )
    return int(count or 0)


async def measure(settings: Settings, args: argparse.Namespace) -> None:
    engine = create_engine(settings.store, owner_url(settings))
    request_engine = create_engine(settings.store, settings.store.database_url.get_secret_value())
    rng = np.random.default_rng(11)
    target = "filters-target"
    memories: Memories
    if args.memories == "locomo":
        memories = LocomoMemories()
        _, queries = memories.questions(args.queries, rng)
    else:
        memories = SyntheticMemories(word_vectors())
        _, queries, _ = memories.batch(10_000_000, args.queries)
        queries = queries + rng.normal(0, 0.3 / np.sqrt(queries.shape[1]), queries.shape)
        queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    shortlists = [int(n) for n in args.shortlists.split(",")] if args.shortlists else []
    shortlists = shortlists or [settings.retrieval.candidates_256d]
    try:
        started = time.perf_counter()
        if await loaded(engine, target) != args.size:  # a kept database holds them already
            await drop_hnsw_indexes(engine)
            for number in range(args.other_users):
                await load(engine, memories, f"filters-other-{number}", args.other_size)
            await load(engine, memories, target, args.size)
        await build_hnsw_indexes(engine)  # a no-op where they exist
        await vacuum_analyze(engine)
        print(
            f"== {args.size} {args.memories} memories for the queried user, {args.other_users} "
            f"other users x {args.other_size}; loaded in {time.perf_counter() - started:.0f} s; "
            f"{len(queries)} queries; exact_max {settings.retrieval.exact_search_max_memories}, "
            f"ef_search {settings.retrieval.hnsw_ef_search}",
            flush=True,
        )
        selectivities = (
            [float(x) for x in args.selectivities.split(",")] if args.selectivities else None
        )
        cases: list[tuple[str, float | None]] = [
            ("none", None),
            *(("metadata.b", s) for s in selectivities or SELECTIVITIES),
        ][1 if selectivities else 0 :]
        print(
            f"{'filter':>12} {'mode':>5} {'shortlist':>9} {'recall@10':>9} {'vs scan':>8} "
            f"{'p50 ms':>7} {'p95 ms':>7}"
        )
        for _, selectivity in cases:
            below = 1000 if selectivity is None else max(1, round(selectivity * 1000))
            where = (
                None
                if selectivity is None
                else to_sql(parse_filter({"field": "metadata.b", "op": "lt", "value": below}))
            )
            modes = [("auto", settings.retrieval.exact_search_max_memories), ("hnsw", 0)]
            rows = [(m, n) for m in modes[: 1 if args.auto_only else 2] for n in shortlists]
            recalls: dict[tuple, list[float]] = {row: [] for row in rows}
            leg_recalls: dict[tuple, list[float]] = {row: [] for row in rows}
            timings: dict[tuple, list[float]] = {row: [] for row in rows}
            for query in queries:
                vector = "[" + ",".join(map(repr, query.tolist())) + "]"
                with tenant_scope(DEFAULT_TENANT_ID):
                    async with AsyncSession(request_engine) as session, session.begin():
                        await session.execute(
                            text("SELECT set_config('cognis.tenant_id', :t, true)"),
                            {"t": str(DEFAULT_TENANT_ID)},
                        )
                        truth = [
                            r.id
                            for r in await session.execute(
                                EXACT, {"user_id": target, "below": below, "query": vector}
                            )
                        ]
                        # The same two stages over every matching memory, no index.
                        scanned = {
                            n: await vector_leg(session, settings, target, query, where, 10**9, n)
                            for n in shortlists
                        }
                for row in rows:
                    (_, exact_max), shortlist = row
                    with tenant_scope(DEFAULT_TENANT_ID):
                        async with AsyncSession(request_engine) as session, session.begin():
                            await session.execute(
                                text("SELECT set_config('cognis.tenant_id', :t, true)"),
                                {"t": str(DEFAULT_TENANT_ID)},
                            )
                            t0 = time.perf_counter()
                            found = await vector_leg(
                                session, settings, target, query, where, exact_max, shortlist
                            )
                            timings[row].append((time.perf_counter() - t0) * 1000)
                    recalls[row].append(len(set(found) & set(truth)) / max(1, len(truth)))
                    leg_recalls[row].append(
                        len(set(found) & set(scanned[shortlist])) / max(1, len(truth))
                    )
            label = "none" if selectivity is None else f"{selectivity:.1%}"
            for row in rows:
                (mode, _), shortlist = row
                print(
                    f"{label:>12} {mode:>5} {shortlist:>9} {np.mean(recalls[row]):9.3f} "
                    f"{np.mean(leg_recalls[row]):8.3f} {percentile(timings[row], 50):7.2f} "
                    f"{percentile(timings[row], 95):7.2f}",
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
    parser.add_argument(
        "--memories",
        choices=("locomo", "synthetic"),
        default="locomo",
        help="locomo: pairs of real LoCoMo turns, queried by LoCoMo's questions; synthetic: "
        "bench.scale's 73-word sentences (near ties: a harsher test of the 256D shortlist)",
    )
    parser.add_argument(
        "--shortlists", default="", help="256D shortlist sizes to compare (default: the setting)"
    )
    parser.add_argument("--auto-only", action="store_true", help="skip the always-HNSW rows")
    parser.add_argument(
        "--selectivities", default="", help="only these filters, e.g. 0.01 (default: all, and none)"
    )
    parser.add_argument(
        "--keep",
        metavar="DATABASE",
        help="load into this database once and keep it for later runs (same sizes reuse it)",
    )
    args = parser.parse_args()
    base = Settings()
    configure_logging("WARNING", False)

    name = args.keep or f"cognis_bench_filters_{uuid.uuid4().hex[:8]}"
    return measure_in_scratch_database(
        base, name, lambda settings, _: measure(settings, args), keep=bool(args.keep)
    )


if __name__ == "__main__":
    sys.exit(main())
