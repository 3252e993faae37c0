"""Tenants in OpenSearch: one shared index with a tenant term filter, or an index per tenant?

Loads the same synthetic memories (tenants x users x memories, words drawn from one vocabulary)
both ways into scratch indexes, then times the service's BM25 query for random (tenant, user)
pairs: shared index filtered by user only (the query before tenants), shared index filtered by
tenant and user (what the service does), and the tenant's own index filtered by user. Prints
p50/p95 per layout and the shards each layout needs; the scratch indexes are deleted.

    make bench-tenants   (or: python -m bench.tenant_index --tenants 50 --users 20 --memories 50)
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import time
import uuid
from typing import Any

from opensearchpy import AsyncOpenSearch
from opensearchpy.helpers import async_bulk

from app.search_index.client import tenant_filter
from app.search_index.documents import Analysis, index_body

VOCABULARY = [f"w{i}" for i in range(5000)]


def _document(rng: random.Random, tenant: str, user: str) -> dict[str, Any]:
    return {
        "tenant_id": tenant,
        "user_id": user,
        "chain_id": str(uuid.uuid4()),
        "content": " ".join(rng.choices(VOCABULARY, k=12)),
        "category": "hobbies",
        "scope": "USER",
        "is_current": True,
    }


def _query(user: str, text: str, tenant: str | None) -> dict[str, Any]:
    filters: list[dict[str, Any]] = [{"term": {"user_id": user}}, {"term": {"is_current": True}}]
    if tenant is not None:
        filters.insert(0, tenant_filter(uuid.UUID(tenant)))
    return {
        "size": 50,
        "_source": False,
        "query": {"bool": {"must": [{"match": {"content": text}}], "filter": filters}},
    }


async def _time(client: AsyncOpenSearch, index: str, body: dict[str, Any]) -> float:
    started = time.perf_counter()
    await client.search(index=index, body=body)
    return (time.perf_counter() - started) * 1000


async def main(args: argparse.Namespace) -> None:
    client = AsyncOpenSearch(
        hosts=[os.environ.get("COGNIS_OPENSEARCH_URL", "http://127.0.0.1:59200")]
    )
    rng = random.Random(7)
    run = uuid.uuid4().hex[:6]
    shared = f"bench-tenants-{run}-shared"
    tenants = [str(uuid.uuid4()) for _ in range(args.tenants)]
    users = [f"user-{i}" for i in range(args.users)]  # the same user ids in every tenant
    own = {t: f"bench-tenants-{run}-{i}" for i, t in enumerate(tenants)}
    body = index_body(Analysis(english=False, kuromoji=False, cjk=False))
    try:
        for index in (shared, *own.values()):
            await client.indices.create(index=index, body=body)
        actions = []
        for tenant in tenants:
            for user in users:
                for _ in range(args.memories):
                    document = _document(rng, tenant, user)
                    actions.append({"_index": shared, "_source": document})
                    actions.append({"_index": own[tenant], "_source": document})
        await async_bulk(client, actions, chunk_size=2000)
        await client.indices.refresh(index=f"bench-tenants-{run}-*")
        layouts = {
            "shared, user filter only (before tenants)": lambda t, u, q: (
                shared,
                _query(u, q, None),
            ),
            "shared, tenant + user filter (chosen)": lambda t, u, q: (shared, _query(u, q, t)),
            "index per tenant, user filter": lambda t, u, q: (own[t], _query(u, q, None)),
        }
        samples: dict[str, list[float]] = {name: [] for name in layouts}
        for _ in range(args.warmup + args.queries):
            tenant, user = rng.choice(tenants), rng.choice(users)
            text = " ".join(rng.choices(VOCABULARY, k=4))
            for name, build in random.sample(list(layouts.items()), k=len(layouts)):
                index, query = build(tenant, user, text)
                samples[name].append(await _time(client, index, query))
        total = args.tenants * args.users * args.memories
        print(f"{args.tenants} tenants x {args.users} users x {args.memories} memories = {total}")
        print(f"shards: shared 1, per tenant {args.tenants} (OpenSearch's default cap: 1000/node)")
        for name, values in samples.items():
            kept = sorted(values[args.warmup :])
            p95 = kept[int(len(kept) * 0.95) - 1]
            print(f"{name:45s} p50 {statistics.median(kept):6.2f} ms  p95 {p95:6.2f} ms")
    finally:
        await client.indices.delete(index=f"bench-tenants-{run}-*", ignore_unavailable=True)
        await client.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tenants", type=int, default=50)
    parser.add_argument("--users", type=int, default=20)
    parser.add_argument("--memories", type=int, default=50)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=30)
    asyncio.run(main(parser.parse_args()))
