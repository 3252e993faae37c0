"""Relay benchmark: how fast committed memory changes reach OpenSearch at import rates.

Runs in a scratch database (created by the owner, COGNIS_MIGRATION_DATABASE_URL, on its
server, migrated with Alembic, dropped at the end) and a scratch OpenSearch index, so no other
relay takes its events and nothing of it stays behind. Memories are written directly with their
outbox events, as the memory service writes them (as the default tenant), but with synthetic
unit vectors (no embedding): what is measured is the relay, which runs as the worker role
(COGNIS_WORKER_DATABASE_URL) as the service's does, not the model.

- backlog: N memories committed while no relay runs, then one relay drains them:
  documents/s delivered, and time until all are BM25-searchable (refresh included);
- live: a relay runs while N more are committed in import-sized transactions: write rate,
  and how long after the last commit the index is consistent.

Relay settings come from the environment (COGNIS_RELAY_BATCH_SIZE, COGNIS_OPENSEARCH_BULK_*,
COGNIS_OPENSEARCH_REFRESH_INTERVAL) or the flags. Prints numbers; asserts nothing. Timings
on a shared 2-core machine are noisy: compare configurations in one run.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
from pydantic import SecretStr
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
)

from app.config import Settings
from app.db.engine import create_engine, create_sessionmaker
from app.db.models import Memory, OutboxEvent
from app.logging import configure_logging
from app.search_index import outbox
from app.search_index.client import MemoryIndex
from app.search_index.relay import OutboxRelay
from app.vocabulary import COARSE_DIM, EMBEDDING_DIM
from bench.database import default_tenant, in_scratch_database, owner_engine

ROOT = Path(__file__).resolve().parent.parent
WORDS = [
    "garden",
    "coffee",
    "violin",
    "marathon",
    "tokyo",
    "sister",
    "python",
    "budget",
    "allergy",
    "museum",
    "kayak",
    "novel",
    "chess",
    "recipe",
    "physics",
    "spanish",
    "yoga",
    "promotion",
    "vacation",
    "piano",
    "cycling",
    "mortgage",
    "hiking",
    "sushi",
    "guitar",
    "painting",
    "camping",
    "vegan",
    "podcast",
    "startup",
]
POLL_S = 0.05


def synthetic_memory(user_id: str, rng: np.random.Generator, now: datetime) -> Memory:
    full = rng.standard_normal(EMBEDDING_DIM).astype(np.float32)
    full /= np.linalg.norm(full)
    coarse = full[:COARSE_DIM] / np.linalg.norm(full[:COARSE_DIM])
    memory_id = uuid.uuid4()
    return Memory(
        id=memory_id,
        user_id=user_id,
        chain_id=memory_id,
        version=1,
        content=" ".join(random.choices(WORDS, k=16)),
        category="hobbies",
        scope="USER",
        is_current=True,
        created_at=now,
        embedding_768d=full,
        embedding_256d=coarse,
        metadata_={},
    )


async def write_memories(
    engine: AsyncEngine,
    users: list[str],
    count: int,
    per_transaction: int,
    rng: np.random.Generator,
) -> float:
    """Commit `count` memories with their outbox events; returns the seconds it took."""
    started = time.perf_counter()
    for offset in range(0, count, per_transaction):
        now = datetime.now(UTC)
        batch = [
            synthetic_memory(users[i % len(users)], rng, now)
            for i in range(offset, min(offset + per_transaction, count))
        ]
        async with default_tenant(engine) as session:
            session.add_all(batch)
            outbox.enqueue_index(session, batch)
    return time.perf_counter() - started


async def pending(sessionmaker: async_sessionmaker[AsyncSession]) -> int:
    async with sessionmaker() as session:
        return await outbox.pending_count(session)


async def wait_for(predicate, timeout_s: float) -> float | None:
    """Seconds until `predicate()` holds (polled), or None after `timeout_s`."""
    started = time.perf_counter()
    while time.perf_counter() - started < timeout_s:
        if await predicate():
            return time.perf_counter() - started
        await asyncio.sleep(POLL_S)
    return None


async def searchable(index: MemoryIndex, expected: int) -> bool:
    # A count is a search: it sees only what a refresh has made visible, as BM25 does.
    response = await index.client.count(index=index.name, body={"query": {"match_all": {}}})
    return int(response["count"]) >= expected


async def run_phases(settings: Settings, args: argparse.Namespace) -> None:
    owner = owner_engine(settings)  # writes as the service would, in the default tenant
    assert settings.store.worker_database_url is not None  # main() sets all three URLs
    engine = create_engine(settings.store, settings.store.worker_database_url.get_secret_value())
    sessionmaker = create_sessionmaker(engine)
    index = MemoryIndex(settings.store)
    relay = OutboxRelay(sessionmaker, index, settings.relay, settings.store)
    rng = np.random.default_rng(7)
    users = [f"bench-relay-{i}" for i in range(args.users)]
    try:
        await index.ensure_index()
        print(
            f"relay_batch_size={settings.relay.relay_batch_size} "
            f"bulk_max_docs={settings.relay.opensearch_bulk_max_docs} "
            f"bulk_max_bytes={settings.relay.opensearch_bulk_max_bytes} "
            f"bulk_concurrency={settings.relay.opensearch_bulk_concurrency} "
            f"refresh_interval={settings.store.opensearch_refresh_interval}",
            flush=True,
        )

        # Backlog: everything committed first, then one relay drains it.
        wrote_s = await write_memories(owner, users, args.memories, args.per_tx, rng)
        print(f"backlog: wrote {args.memories} memories in {wrote_s:.1f} s", flush=True)
        stop = asyncio.Event()
        started = time.perf_counter()
        loop = asyncio.create_task(relay.run_forever(stop))

        async def drained() -> bool:
            return await pending(sessionmaker) == 0

        async def all_searchable() -> bool:
            return await searchable(index, args.memories)

        delivered_s = await wait_for(drained, args.timeout)
        consistent_s = await wait_for(all_searchable, args.timeout)
        if delivered_s is None or consistent_s is None:
            print(f"backlog: not drained within {args.timeout} s", flush=True)
        else:
            total_s = time.perf_counter() - started
            print(
                f"backlog: delivered {args.memories} in {delivered_s:.2f} s = "
                f"{args.memories / delivered_s:.0f} docs/s; all searchable after "
                f"{total_s:.2f} s",
                flush=True,
            )

        # Live: the relay runs while an import writes.
        wrote_s = await write_memories(owner, users, args.memories, args.per_tx, rng)

        async def all_live_searchable() -> bool:
            return await searchable(index, 2 * args.memories)

        caught_up = await wait_for(all_live_searchable, args.timeout)
        print(
            f"live: wrote {args.memories} in {wrote_s:.1f} s = {args.memories / wrote_s:.0f}/s; "
            + (
                f"searchable {caught_up * 1000:.0f} ms after the last commit"
                if caught_up is not None
                else f"not consistent within {args.timeout} s"
            ),
            flush=True,
        )
        stop.set()
        await loop
        async with sessionmaker() as session:
            failed = await session.scalar(
                select(func.count()).select_from(OutboxEvent).where(OutboxEvent.attempts > 0)
            )
        print(f"events that needed a retry: {failed}", flush=True)
    finally:
        await index.drop_index()
        await index.close()
        await engine.dispose()
        await owner.dispose()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--memories", type=int, default=5000)
    parser.add_argument("--users", type=int, default=10)
    parser.add_argument("--per-tx", type=int, default=500, help="memories per write transaction")
    parser.add_argument("--batch-size", type=int, help="COGNIS_RELAY_BATCH_SIZE")
    parser.add_argument("--bulk-docs", type=int, help="COGNIS_OPENSEARCH_BULK_MAX_DOCS")
    parser.add_argument("--bulk-concurrency", type=int, help="COGNIS_OPENSEARCH_BULK_CONCURRENCY")
    parser.add_argument("--refresh-interval", help="COGNIS_OPENSEARCH_REFRESH_INTERVAL")
    parser.add_argument("--timeout", type=float, default=300.0)
    args = parser.parse_args()

    overrides: dict[str, object] = {
        key: value
        for key, value in {
            "relay_batch_size": args.batch_size,
            "opensearch_bulk_max_docs": args.bulk_docs,
            "opensearch_bulk_concurrency": args.bulk_concurrency,
            "opensearch_refresh_interval": args.refresh_interval,
        }.items()
        if value is not None
    }
    base = Settings()
    configure_logging("WARNING", False)  # one line per relay batch would drown the numbers
    scratch = f"cognis_bench_relay_{uuid.uuid4().hex[:8]}"

    def work(scratch_urls: dict[str, str]) -> None:
        settings = base.model_copy(
            update={
                **overrides,
                **{field: SecretStr(url) for field, url in scratch_urls.items()},
                "opensearch_index": scratch.replace("_", "-"),
                "relay_poll_interval_s": 0.5,
            }
        )
        asyncio.run(run_phases(settings, args))

    return in_scratch_database(base, scratch, work)


if __name__ == "__main__":
    sys.exit(main())
