"""Foundation benchmark against a running service (`make up`): outbox lag and search latency.

- outbox lag: time from a memory write's HTTP response until OpenSearch returns it for a
  unique keyword (what "BM25-searchable" means, refresh interval included);
- search latency: end-to-end HTTP round trip of /search with N memories for one user.

Memories are LoCoMo turns read from ../shared/data (never copied); the bench user is erased at
the end. Prints numbers; asserts nothing. Timings on a 2-core machine are noisy: compare runs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import uuid
from pathlib import Path

import httpx

from bench import as_client

ROOT = Path(__file__).resolve().parent.parent
# The shared benchmark data, next to the main checkout; COGNIS_BENCH_DATA names it from
# elsewhere (a git worktree).
DATA = Path(os.environ.get("COGNIS_BENCH_DATA", ROOT.parent / "shared" / "data"))
LOCOMO = DATA / "locomo" / "locomo10.json"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def summary(values: list[float]) -> str:
    return (
        f"n={len(values)} p50={percentile(values, 50):.1f} ms p95={percentile(values, 95):.1f} ms "
        f"p99={percentile(values, 99):.1f} ms mean={statistics.fmean(values):.1f} ms"
    )


def locomo_turns_and_questions(limit: int) -> tuple[list[str], list[str]]:
    data = json.loads(LOCOMO.read_text())
    turns: list[str] = []
    questions: list[str] = []
    for sample in data:
        conversation = sample["conversation"]
        for key in sorted(k for k in conversation if k.startswith("session_") and "date" not in k):
            for turn in conversation[key]:
                turns.append(f"{turn['speaker']}: {turn['text']}")
        questions += [qa["question"] for qa in sample["qa"]]
        if len(turns) >= limit:
            break
    return turns[:limit], questions


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--api", default=os.environ.get("COGNIS_API", "http://127.0.0.1:8000"))
    parser.add_argument("--key", default=os.environ.get("COGNIS_API_KEY", "cognis-dev-key"))
    parser.add_argument(
        "--opensearch", default=os.environ.get("COGNIS_OPENSEARCH_URL", "http://127.0.0.1:59200")
    )
    parser.add_argument(
        "--index", default=os.environ.get("COGNIS_OPENSEARCH_INDEX", "cognis-memories")
    )
    parser.add_argument("--memories", type=int, default=1000)
    parser.add_argument("--lag-samples", type=int, default=30)
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()

    user = f"bench-{uuid.uuid4().hex[:8]}"
    api = httpx.Client(base_url=args.api, headers={"X-API-Key": args.key}, timeout=120)
    opensearch = httpx.Client(base_url=args.opensearch, timeout=10)
    turns, questions = locomo_turns_and_questions(args.memories)
    try:
        print(f"loading {len(turns)} memories for {user} ...", flush=True)
        start = time.perf_counter()
        for offset in range(0, len(turns), 100):
            batch = [{"content": t} for t in turns[offset : offset + 100]]
            as_client.post_batch_sync(api, user, batch)
            print(f"  {offset + len(batch)}/{len(turns)}", flush=True)
        load_s = time.perf_counter() - start
        print(f"ingest: {len(turns) / load_s:.1f} memories/s (batches of 100, embedding included)")

        lags: list[float] = []
        for i in range(args.lag_samples):
            token = f"zq{uuid.uuid4().hex[:10]}"
            as_client.post_sync(
                api, f"/v1/users/{user}/memories", json={"content": f"Lag probe {i} {token}"}
            )
            written = time.perf_counter()
            query = {
                "query": {
                    "bool": {
                        "must": [{"match": {"content": token}}],
                        "filter": [{"term": {"user_id": user}}],
                    }
                }
            }
            while True:
                hits = opensearch.post(f"/{args.index}/_search", json=query).json()
                if hits["hits"]["hits"]:
                    lags.append((time.perf_counter() - written) * 1000)
                    break
                if time.perf_counter() - written > 30:
                    print("  a probe was not searchable within 30 s", file=sys.stderr)
                    break
                time.sleep(0.01)
        print(f"outbox lag (write -> BM25-searchable): {summary(lags)}")

        latencies: list[float] = []
        server_ms: list[float] = []
        for question in (questions * 3)[: args.queries]:
            t0 = time.perf_counter()
            response = as_client.post_sync(
                api, f"/v1/users/{user}/search", json={"query": question, "top_k": 10}
            )
            latencies.append((time.perf_counter() - t0) * 1000)
            server_ms.append(response.json()["duration_ms"])
        print(f"search latency, HTTP round trip, {len(turns)} memories: {summary(latencies)}")
        print(f"search latency, server-side total:  {summary(server_ms)}")
    finally:
        erased = api.delete(f"/v1/users/{user}")
        print(f"erased bench user: {erased.status_code} {erased.text[:200]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
