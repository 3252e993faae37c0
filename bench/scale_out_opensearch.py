"""A node of a 3-node OpenSearch cluster lost under load: `python -m bench.scale_out_opensearch`.

With the local cluster up (scripts/opensearch-cluster.sh; started here if it is not) and an API
process of this bench on it (its own index, all three node URLs, the dev database of
`.local/cognis.env`), writers POST memories and searchers search for the latest one's unique
word. The node holding the index's primary shard is killed with SIGKILL, started again after
`--down-s`, and the load goes on until the index is green again. Printed: searches answered,
5xx, answers without the BM25 leg or slower than `--slow-ms` and the seconds they spanned, and
whether Postgres and the index hold the same memories afterwards (nothing lost). Also the index's
bytes per memory document (`_cat/indices`), for the sizing note in docs/benchmarks/scale-out.md.

tests/cluster uses the same load (`lose_a_node`) and comparison (`stores_compared`).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from opensearchpy import AsyncOpenSearch
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from bench.foundation import LOCOMO, locomo_turns_and_questions, percentile
from bench.ingestion import _start_api
from bench.opensearch_cluster import OpenSearchCluster, primary_node, wait_green

ROOT = Path(__file__).resolve().parent.parent
API_KEY = "scale-out-" + uuid.uuid4().hex


@dataclass(frozen=True, slots=True)
class SearchAnswer:
    at: float  # seconds since the load began, when the answer came
    status: int  # 0: no HTTP answer
    ms: float
    bm25: bool  # the BM25 leg answered (not in missing_legs)
    results: int
    stale: bool | None  # index_lag.stale: the BM25 leg may have missed the user's changes
    probe_found: bool  # the memory searched for was among the BM25 leg's hits


@dataclass
class NodeLossRun:
    """What the load saw while a node was lost and came back (times since the load began)."""

    node: int = 0
    killed_at: float = 0.0
    restarted_at: float = 0.0
    green_at: float = 0.0
    searches: list[SearchAnswer] = field(default_factory=list)
    write_statuses: list[int] = field(default_factory=list)
    written: dict[str, list[str]] = field(default_factory=dict)  # memory ids, by user

    def degraded(self, slow_ms: float) -> list[SearchAnswer]:
        """Answers without the BM25 leg, or slower than `slow_ms`, or not 200."""
        return [s for s in self.searches if s.status != 200 or not s.bm25 or s.ms > slow_ms]

    def degraded_span_s(self, slow_ms: float) -> float:
        """From the kill to the last degraded answer after it (0: none)."""
        after = [s.at for s in self.degraded(slow_ms) if s.at >= self.killed_at]
        return round(max(after) - self.killed_at, 1) if after else 0.0

    def server_errors(self) -> int:
        statuses = [s.status for s in self.searches] + self.write_statuses
        return sum(1 for status in statuses if status >= 500)

    def untruthful(self) -> list[SearchAnswer]:
        """Answers whose BM25 leg answered and which said the user's writes were all in the
        index (not stale), yet whose BM25 hits lacked the memory written just before."""
        return [s for s in self.searches if s.bm25 and s.stale is False and not s.probe_found]


def unique_word() -> str:
    """A word no other memory has: the search for it finds one memory by BM25."""
    return "zq" + uuid.uuid4().hex[:10]


async def _write(http: httpx.AsyncClient, user_id: str, word: str, run: NodeLossRun) -> str | None:
    """One memory with `word` in it; its id, or None if the write was not acknowledged."""
    content = f"Node loss probe {word}: I keep a garden journal about tomatoes"
    try:
        response = await http.post(f"/v1/users/{user_id}/memories", json={"content": content})
    except httpx.HTTPError:
        run.write_statuses.append(0)
        return None
    run.write_statuses.append(response.status_code)
    if response.status_code != 201:
        return None
    memory_id: str = response.json()["id"]
    run.written.setdefault(user_id, []).append(memory_id)
    return memory_id


async def _write_load(
    http: httpx.AsyncClient, user_id: str, stop: asyncio.Event, run: NodeLossRun
) -> None:
    while not stop.is_set():
        if await _write(http, user_id, unique_word(), run) is None:
            await asyncio.sleep(0.2)


async def _search_load(
    http: httpx.AsyncClient,
    user_id: str,
    stop: asyncio.Event,
    run: NodeLossRun,
    started: float,
) -> None:
    """Write a memory with a word of its own, then search for that word with read-your-writes
    (`consistency: indexed`): the answer either has it from the BM25 leg or says why not."""
    while not stop.is_set():
        word = unique_word()
        memory_id = await _write(http, user_id, word, run)
        if memory_id is None:
            await asyncio.sleep(0.2)
            continue
        body = {
            "query": word,
            "top_k": 10,
            "explain": True,
            "consistency": "indexed",
            # The memories differ only by their unique words: near-duplicate removal would
            # leave one, and a word's embedding is unrelated to any of them (relevance 0).
            # BM25's weight puts the one memory that has the word first.
            "stages": {"dedup": False},
            "min_relevance": 0,
            "rrf": {"weight_vector": 0.2, "weight_bm25": 0.8},
        }
        began = time.monotonic()
        try:
            response = await http.post(f"/v1/users/{user_id}/search", json=body)
        except httpx.HTTPError:
            run.searches.append(
                SearchAnswer(time.monotonic() - started, 0, 0.0, False, 0, None, False)
            )
            await asyncio.sleep(0.2)
            continue
        ms = (time.monotonic() - began) * 1000
        at = time.monotonic() - started
        if response.status_code != 200:
            run.searches.append(SearchAnswer(at, response.status_code, ms, False, 0, None, False))
            continue
        found = response.json()
        probe_found = any(
            hit["memory"]["id"] == memory_id and (hit.get("explanation") or {}).get("bm25")
            for hit in found["results"]
        )
        run.searches.append(
            SearchAnswer(
                at=at,
                status=200,
                ms=ms,
                bm25="bm25" not in found["missing_legs"],
                results=len(found["results"]),
                stale=found["index_lag"]["stale"],
                probe_found=probe_found,
            )
        )


async def lose_a_node(
    http: httpx.AsyncClient,
    cluster: OpenSearchCluster,
    index: str,
    user_id: str,
    before_s: float = 8.0,
    down_s: float = 15.0,
    after_s: float = 8.0,
    writers: int = 1,
    searchers: int = 2,
) -> NodeLossRun:
    """Write and search load on the API (`user_id`'s writers; each searcher writes and finds
    memories of its own user, `user_id-s<n>`); kill -9 the node holding the index's primary
    shard after `before_s`, start it again `down_s` later, wait for green, `after_s` more load."""
    run, stop = NodeLossRun(), asyncio.Event()
    started = time.monotonic()
    tasks = [asyncio.create_task(_write_load(http, user_id, stop, run)) for _ in range(writers)]
    tasks += [
        asyncio.create_task(_search_load(http, f"{user_id}-s{n}", stop, run, started))
        for n in range(searchers)
    ]
    client = AsyncOpenSearch(hosts=cluster.hosts)
    try:
        await asyncio.sleep(before_s)
        run.node = await primary_node(client, index)
        await cluster.kill_node(run.node)
        run.killed_at = time.monotonic() - started
        await asyncio.sleep(down_s)
        run.restarted_at = time.monotonic() - started
        await cluster.start_node(run.node)
        await wait_green(client, index)
        run.green_at = time.monotonic() - started
        await asyncio.sleep(after_s)
    finally:
        stop.set()
        outcomes = await asyncio.gather(*tasks, return_exceptions=True)
        await client.close()
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            raise outcome  # a load task failed: its numbers would be wrong
    return run


async def stores_compared(
    database_url: str, client: AsyncOpenSearch, index: str, users: list[str], timeout_s: float = 120
) -> tuple[set[str], set[str]]:
    """The users' memory ids in Postgres and in the index, once the relay has delivered every
    pending event of theirs (or `timeout_s` passed)."""
    engine = create_async_engine(database_url)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            async with engine.connect() as connection:
                pending = await connection.scalar(
                    text(
                        "SELECT count(*) FROM outbox WHERE processed_at IS NULL "
                        "AND user_id = ANY(:u)"
                    ),
                    {"u": users},
                )
            if pending == 0 or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.5)
        async with engine.connect() as connection:
            stored: set[str] = set(
                (
                    await connection.execute(
                        text("SELECT id::text FROM memories WHERE user_id = ANY(:u)"),
                        {"u": users},
                    )
                ).scalars()
            )
    finally:
        await engine.dispose()
    await client.indices.refresh(index=index)
    hits = await client.search(
        index=index,
        body={"size": 10_000, "_source": False, "query": {"terms": {"user_id": users}}},
    )
    return stored, {hit["_id"] for hit in hits["hits"]["hits"]}


async def bytes_per_document(client: AsyncOpenSearch, index: str) -> tuple[int, int, float]:
    """Documents, bytes of the primaries and bytes per document, after a refresh and a merge
    to one segment (as a long-lived index settles)."""
    await client.indices.refresh(index=index)
    await client.indices.forcemerge(index=index, max_num_segments=1, request_timeout=300)
    row = (await client.cat.indices(index=index, bytes="b", format="json"))[0]
    docs, size = int(row["docs.count"]), int(row["pri.store.size"])
    return docs, size, size / max(docs, 1)


def _bench_env(urls: str, index: str, model: str) -> dict[str, str]:
    env = dict(os.environ)
    local = ROOT / ".local" / "cognis.env"
    for line in local.read_text().splitlines():
        if "=" in line and not line.startswith("#"):
            key, value = line.split("=", 1)
            env.setdefault(key, value)
    env.update(
        {
            "COGNIS_OPENSEARCH_URL": urls,
            "COGNIS_OPENSEARCH_INDEX": index,
            # A model of the API's own, the small one: the bench must not lean on a model
            # service another clone may be running.
            "COGNIS_EMBEDDING_BACKEND": "torch",
            "COGNIS_QUERY_EMBEDDING_BACKEND": "same",
            "COGNIS_EMBEDDING_MODEL": model,
            "COGNIS_API_KEY_HASHES": hashlib.sha256(API_KEY.encode()).hexdigest(),
            "COGNIS_INGEST_WORKER_IN_API": "false",
            "COGNIS_SENTENCE_VECTORS": "false",
            "COGNIS_RELAY_POLL_INTERVAL_S": "0.5",
            "COGNIS_LOG_JSON": "true",
            "HF_HUB_OFFLINE": "1",
        }
    )
    return env


async def _load_memories(http: httpx.AsyncClient, user_id: str, texts: list[str]) -> float:
    began = time.monotonic()
    for start in range(0, len(texts), 100):
        batch = [{"content": t} for t in texts[start : start + 100]]
        response = await http.post(
            f"/v1/users/{user_id}/memories/batch", json={"memories": batch}, timeout=600
        )
        response.raise_for_status()
    return time.monotonic() - began


def _latency(answers: list[SearchAnswer]) -> str:
    ms = [s.ms for s in answers if s.status == 200]
    if not ms:
        return "n=0"
    return f"n={len(ms)} p50 {percentile(ms, 50):.0f} ms p95 {percentile(ms, 95):.0f} ms"


def _report(run: NodeLossRun, slow_ms: float | None, stored: set[str], indexed: set[str]) -> None:
    answered = [s for s in run.searches if s.status == 200]
    before = [s for s in run.searches if s.at < run.killed_at]
    if slow_ms is None:  # slower than twice the p95 before the kill counts as degraded
        slow_ms = 2 * percentile([s.ms for s in before] or [1000.0], 95)
    phases = {
        "before the kill": before,
        "node down": [s for s in run.searches if run.killed_at <= s.at < run.restarted_at],
        "node restarting, recovering": [
            s for s in run.searches if run.restarted_at <= s.at < run.green_at
        ],
        "green again": [s for s in run.searches if s.at >= run.green_at],
    }
    print(
        f"node {run.node} (primary of the index) killed at {run.killed_at:.1f} s, "
        f"started again at {run.restarted_at:.1f} s, index green at {run.green_at:.1f} s"
    )
    print(
        f"searches: {len(run.searches)} sent, {len(answered)} answered 200, "
        f"{sum(1 for s in answered if s.results > 0)} with results"
    )
    for name, answers in phases.items():
        print(
            f"  {name}: {_latency(answers)}, {sum(1 for s in answers if not s.bm25)} without "
            f"the BM25 leg, {sum(1 for s in answers if s.ms > slow_ms)} slower than "
            f"{slow_ms:.0f} ms"
        )
    print(
        f"degraded answers (no BM25 leg, or slower than {slow_ms:.0f} ms): "
        f"{len(run.degraded(slow_ms))}, the last {run.degraded_span_s(slow_ms)} s after the "
        f"kill; read-your-writes (indexed): the memory written just before found by BM25 in "
        f"{sum(1 for s in answered if s.probe_found)}/{len(answered)} answers, "
        f"{sum(1 for s in answered if s.stale)} said stale, {len(run.untruthful())} untruthful "
        "(not stale, BM25 on, memory missing)"
    )
    unanswered = sum(1 for s in run.write_statuses if s == 0)
    unanswered += sum(1 for s in run.searches if s.status == 0)
    print(
        f"writes: {len(run.write_statuses)} sent, "
        f"{sum(1 for s in run.write_statuses if s == 201)} acknowledged; 5xx (searches and "
        f"writes): {run.server_errors()}; no answer: {unanswered}"
    )
    print(
        f"afterwards: {len(stored)} memories in Postgres, {len(indexed)} in the index, "
        f"lost (in Postgres, not in the index): {len(stored - indexed)}, "
        f"extra: {len(indexed - stored)}"
    )


@dataclass
class Bench:
    """The bench's cluster, index and API process."""

    cluster: OpenSearchCluster
    index: str
    env: dict[str, str]
    process: subprocess.Popen
    url: str


def start_bench(model: str) -> Bench:
    cluster = OpenSearchCluster()
    began = time.monotonic()
    cluster.start()
    print(f"cluster up in {time.monotonic() - began:.0f} s: {cluster.urls}", flush=True)
    index = f"cognis-bench-scale-out-{uuid.uuid4().hex[:6]}"
    env = _bench_env(cluster.urls, index, model)
    subprocess.run(
        [sys.executable, "-m", "alembic", "upgrade", "head"],
        cwd=ROOT,
        env={**env, "COGNIS_DATABASE_URL": env["COGNIS_MIGRATION_DATABASE_URL"]},
        check=True,
        capture_output=True,
    )
    log_path = ROOT / ".local" / "logs" / "bench-scale-out-opensearch.log"
    process, url = _start_api(env, log_path)
    return Bench(cluster, index, env, process, url)


async def measure(bench: Bench, args: argparse.Namespace) -> None:
    index, cluster = bench.index, bench.cluster
    client = AsyncOpenSearch(hosts=cluster.hosts)
    loaded_user, load_user = f"bench-so-load-{index[-6:]}", f"bench-so-kill-{index[-6:]}"
    try:
        settings = await client.indices.get_settings(index=index, name="index.number_of_*")
        print(f"index {index}: {settings[index]['settings']['index']}", flush=True)
        async with httpx.AsyncClient(
            base_url=bench.url, headers={"X-API-Key": API_KEY}, timeout=60
        ) as http:
            texts, _ = locomo_turns_and_questions(args.memories)
            loaded_s = await _load_memories(http, loaded_user, texts)
            print(f"loaded {len(texts)} LoCoMo turns as memories in {loaded_s:.0f} s", flush=True)
            run = await lose_a_node(
                http,
                cluster,
                index,
                load_user,
                before_s=args.before_s,
                down_s=args.down_s,
                after_s=args.after_s,
                writers=args.writers,
                searchers=args.searchers,
            )
            stored, indexed = await stores_compared(
                bench.env["COGNIS_MIGRATION_DATABASE_URL"],
                client,
                index,
                [loaded_user, *run.written],
            )
            _report(run, args.slow_ms, stored, indexed)
            docs, size, per_doc = await bytes_per_document(client, index)
            print(
                f"index size: {docs} documents, {size} bytes in primaries after a merge to one "
                f"segment: {per_doc:.0f} bytes per memory document"
            )
            for user in (loaded_user, *run.written):
                await http.delete(f"/v1/users/{user}", timeout=600)
    finally:
        await client.indices.delete(index=index, ignore_unavailable=True)
        await client.close()


def main() -> int:
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[attr-defined,union-attr]
    small = Path.home() / ".cache" / "cognis-memory" / "models" / "all-MiniLM-L6-v2"
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default=str(small), help="embedding model folder")
    parser.add_argument("--memories", type=int, default=2000, help="LoCoMo turns loaded first")
    parser.add_argument("--before-s", type=float, default=10.0, help="load before the kill")
    parser.add_argument("--down-s", type=float, default=20.0, help="the node down this long")
    parser.add_argument("--after-s", type=float, default=10.0, help="load after green")
    parser.add_argument("--writers", type=int, default=1)
    parser.add_argument("--searchers", type=int, default=2)
    parser.add_argument(
        "--slow-ms",
        type=float,
        default=None,
        help="a slower search counts as degraded; default: twice the p95 before the kill",
    )
    parser.add_argument("--keep-cluster", action="store_true", help="leave the cluster running")
    args = parser.parse_args()
    if not LOCOMO.exists():
        parser.error(f"{LOCOMO} is missing (the LoCoMo data)")
    bench = start_bench(args.model)
    try:
        asyncio.run(measure(bench, args))
    finally:
        bench.process.terminate()
        bench.process.wait(timeout=60)
        if not args.keep_cluster:
            bench.cluster.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
