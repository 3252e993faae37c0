"""Bytes a memory takes in Postgres: its row (heap and TOAST: the 768D vector, the 256D one,
its sentence vectors), each index of `memories` (the 256D HNSW graph among them) and its outbox
row. Inserts N memories of a scratch user the way bench/scale.py's bulk load does (as the
tables' owner, with outbox rows), with LoCoMo-length text and `--sentences` sentence vectors
each, measures the growth of every relation, then deletes them. The basis of the cost figures
in docs/benchmarks/scale-out.md. Prints numbers; asserts nothing.

    set -a; . .local/cognis.env; set +a; python -m bench.bytes_per_memory --memories 2000
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import uuid

import numpy as np
from sqlalchemy import text

from app.config import Settings
from bench.database import default_tenant, owner_engine
from bench.scale import INSERT, vector_literal

SIZES = text(
    """
    SELECT 'memories (heap + TOAST)', pg_table_size('memories')
    UNION ALL SELECT c.relname, pg_relation_size(c.oid)
      FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
     WHERE i.indrelid = 'memories'::regclass
    UNION ALL SELECT 'outbox (with its indexes)', pg_total_relation_size('outbox')
    """
)
# About two LoCoMo turns: what bench/scale.py's LoCoMo memories hold.
TEXT = (
    "Caroline: I went to the LGBTQ support group yesterday and it was so powerful, the stories "
    "people shared about their journeys really stuck with me. Melanie: That sounds amazing!"
)


async def sizes(engine) -> dict[str, int]:
    async with engine.connect() as connection:
        return {name: int(size) for name, size in (await connection.execute(SIZES)).all()}


async def main_async(args: argparse.Namespace) -> int:
    engine = owner_engine(Settings())
    user_id = f"bench-bytes-{uuid.uuid4().hex[:6]}"
    rng = np.random.default_rng(5)
    before = await sizes(engine)
    try:
        for first in range(0, args.memories, 500):
            count = min(500, args.memories - first)
            vectors = rng.normal(size=(count * (1 + args.sentences), 768))
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            rows = {
                "ids": [uuid.uuid4() for _ in range(count)],
                "contents": [f"{TEXT} ({first + i})" for i in range(count)],
                "speakers": ["Caroline"] * count,
                "vectors": [vector_literal(v) for v in vectors[:count]],
                "sentences": [
                    "{"
                    + ",".join(
                        f'"{vector_literal(v)}"'
                        for v in vectors[
                            count + i * args.sentences : count + (i + 1) * args.sentences
                        ]
                    )
                    + "}"
                    for i in range(count)
                ],
                "user_id": user_id,
            }
            async with default_tenant(engine) as session:
                await session.execute(INSERT, rows)
            print(f"[load] {first + count}/{args.memories}", flush=True)
        after = await sizes(engine)
        print(f"\n{args.memories} memories, {args.sentences} sentence vectors each:")
        total = 0
        for name, size in after.items():
            grown = (size - before.get(name, 0)) / args.memories
            total += grown
            print(f"  {name:<45}{grown:>9.0f} bytes a memory")
        print(f"  {'all of it':<45}{total:>9.0f} bytes a memory")
    finally:
        async with default_tenant(engine) as session:
            await session.execute(text("DELETE FROM outbox WHERE user_id = :u"), {"u": user_id})
            await session.execute(text("DELETE FROM memories WHERE user_id = :u"), {"u": user_id})
        await engine.dispose()
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=2000)
    parser.add_argument("--sentences", type=int, default=2, help="sentence vectors a memory")
    return asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
