"""Reads on the Postgres replica while a bulk import loads the writer.

Needs `make up-cluster` (or `make up` and `scripts/pg-replica.sh start`): it reads
.local/cognis.env, whose COGNIS_READ_DATABASE_URL names the replica. Starts two API processes
of its own beside it, the same in all but one setting: `writer` reads from the writer, `replica`
from the replica. Seeds a user through the API, then, while an import writes memories and
their outbox rows straight into the writer (as bench/scale.py's bulk load does, as the tables'
owner), alternates windows of concurrent searches ("eventual") on the two processes and
reports each one's searches/s and latency; then sends `consistency: "indexed"` searches to the
replica process and counts where they ran. Beside it all, a sampler takes the writer's WAL
position every 250 ms and times how long the replica takes to replay it: the replica's lag.
Erases its users at the end. Prints numbers; asserts nothing.

    make bench-scale-out BENCH_ARGS="--window-s 15 --rounds 2"
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

import httpx
import numpy as np
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from app.config import Settings
from bench.database import default_tenant, owner_engine
from bench.ports import free_port
from bench.processes import read_env
from bench.scale import INSERT, speaker_of, vector_literal

ROOT = Path(__file__).resolve().parent.parent
LOCAL = Path(os.environ.get("COGNIS_LOCAL_DIR", ROOT / ".local"))
DEV_KEY = "cognis-dev-key"
FACTS = [
    "Mira climbs at the Bleau gym on Thursdays",
    "Mira's sister Ines lives in Porto and teaches cello",
    "Mira is allergic to hazelnuts",
    "Mira's team ships the billing service on Fridays",
    "Mira adopted a greyhound called Pepper in March",
    "Mira prefers window seats on long flights",
    "Mira is learning Portuguese with a tutor on Mondays",
    "Mira's favourite ramen place is Ichiran in Shibuya",
]
QUERIES = [
    "Where does Mira climb?",
    "What is Mira allergic to?",
    "Who is Ines?",
    "What is the dog called?",
    "Which seat does Mira like?",
    "When does the billing team ship?",
    "What language is Mira learning?",
    "Where does Mira eat ramen?",
]


class RandomMemories:
    """Memory rows for the import: short texts, random unit vectors (the writer's load is the
    same whatever the vectors mean)."""

    def __init__(self, seed: int = 11) -> None:
        self._rng = np.random.default_rng(seed)

    def rows(self, first: int, count: int, user_id: str) -> dict[str, object]:
        vectors = self._rng.normal(size=(count, 768))
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        contents = [
            f"Import note {first + i}: the parcel {first + i} left depot 7" for i in range(count)
        ]
        return {
            "ids": [uuid.uuid4() for _ in range(count)],
            "contents": contents,
            "speakers": [speaker_of(c, "import") for c in contents],
            "vectors": [vector_literal(v) for v in vectors],
            "sentences": ["{" + f'"{vector_literal(v)}"' + "}" for v in vectors],
            "user_id": user_id,
        }


class Api:
    def __init__(self, name: str, env: dict[str, str]) -> None:
        self.name = name
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        log = (LOCAL / "logs" / f"bench-scale-out-{name}.log").open("w")
        self.process = subprocess.Popen(  # noqa: S603 - our own interpreter and module
            [sys.executable, "-m", "app", "serve", "--port", str(self.port)],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )

    async def ready(self, timeout_s: float = 300) -> None:
        deadline = time.monotonic() + timeout_s
        async with httpx.AsyncClient(timeout=3) as http:
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    raise RuntimeError(f"API {self.name} exited; see its log in .local/logs")
                try:
                    if (await http.get(f"{self.url}/ready")).status_code == 200:
                        return
                except httpx.HTTPError:
                    pass
                await asyncio.sleep(0.5)
        raise RuntimeError(f"API {self.name} did not become ready")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=60)


async def importing(engine, user_id: str, stop: asyncio.Event, counts: Counter) -> None:
    memories, first = RandomMemories(), 1
    while not stop.is_set():
        async with default_tenant(engine) as session:
            await session.execute(INSERT, memories.rows(first, 50, user_id))
        counts["imported"] += 50
        first += 50


async def replica_lag(writer_url: str, reader_url: str, stop: asyncio.Event) -> list[float]:
    """Every 250 ms: the writer's WAL position, and how long until the replica replays it."""
    writer, reader = create_async_engine(writer_url), create_async_engine(reader_url)
    lags: list[float] = []
    try:
        async with writer.connect() as w, reader.connect() as r:
            while not stop.is_set():
                position = (await w.execute(text("SELECT pg_current_wal_lsn()::text"))).scalar()
                await w.rollback()
                started = time.monotonic()
                while True:
                    behind = (
                        await r.execute(
                            text(
                                "SELECT pg_last_wal_replay_lsn() < CAST(CAST(:p AS text) AS pg_lsn)"
                            ),
                            {"p": position},
                        )
                    ).scalar()
                    await r.rollback()
                    if not behind:
                        break
                    await asyncio.sleep(0.002)
                lags.append((time.monotonic() - started) * 1000)
                await asyncio.sleep(0.25)
    finally:
        await writer.dispose()
        await reader.dispose()
    return lags


async def search_window(
    api: Api, user_id: str, seconds: float, concurrency: int, consistency: str
) -> tuple[list[float], Counter]:
    latencies: list[float] = []
    routes: Counter = Counter()
    deadline = time.monotonic() + seconds
    headers = {"X-API-Key": DEV_KEY}
    async with httpx.AsyncClient(base_url=api.url, headers=headers, timeout=60) as http:

        async def client(n: int) -> None:
            i = n
            while time.monotonic() < deadline:
                started = time.monotonic()
                response = await http.post(
                    f"/v1/users/{user_id}/search",
                    json={"query": QUERIES[i % len(QUERIES)], "consistency": consistency},
                )
                latencies.append((time.monotonic() - started) * 1000)
                routes[
                    (
                        response.status_code,
                        response.headers.get("X-Read-From", "writer"),
                        response.headers.get("X-Read-Fallback"),
                    )
                ] += 1
                i += 1

        await asyncio.gather(*(client(n) for n in range(concurrency)))
    return latencies, routes


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


async def main_async(args: argparse.Namespace) -> int:
    local = read_env(LOCAL / "cognis.env")
    if "COGNIS_READ_DATABASE_URL" not in local:
        print("no replica: run `make up-cluster` (or scripts/pg-replica.sh start) first")
        return 2
    base = {k: v for k, v in os.environ.items() if not k.startswith("COGNIS_")}
    base |= {k: v for k, v in local.items() if k.startswith("COGNIS_")}
    base |= {"COGNIS_LOG_JSON": "true", "HF_HUB_OFFLINE": "1"}
    writer_env = {k: v for k, v in base.items() if k != "COGNIS_READ_DATABASE_URL"}
    apis = {"writer": Api("writer", writer_env), "replica": Api("replica", base)}
    settings = Settings(
        database_url=local["COGNIS_DATABASE_URL"],
        migration_database_url=local["COGNIS_MIGRATION_DATABASE_URL"],
    )
    owner = owner_engine(settings)
    run = uuid.uuid4().hex[:6]
    reader_user, import_user = f"bench-replica-{run}", f"bench-import-{run}"
    try:
        await asyncio.gather(*(api.ready() for api in apis.values()))
        headers = {"X-API-Key": DEV_KEY}
        async with httpx.AsyncClient(
            base_url=apis["writer"].url, headers=headers, timeout=300
        ) as http:
            seeded = await http.post(
                f"/v1/users/{reader_user}/memories/batch",
                params={"wait_for": "indexed"},
                json={"memories": [{"content": f} for f in FACTS]},
            )
            seeded.raise_for_status()
        print(f"[seed] {len(FACTS)} memories for {reader_user}; import into {import_user}")

        stop, counts = asyncio.Event(), Counter()
        load = asyncio.create_task(importing(owner, import_user, stop, counts))
        lag = asyncio.create_task(
            replica_lag(local["COGNIS_DATABASE_URL"], local["COGNIS_READ_DATABASE_URL"], stop)
        )
        await asyncio.sleep(3)  # the import under way
        measured: dict[str, list[float]] = {"writer": [], "replica": []}
        spent: dict[str, float] = {"writer": 0.0, "replica": 0.0}
        routes: dict[str, Counter] = {"writer": Counter(), "replica": Counter()}
        for round_ in range(args.rounds):
            for name in ("writer", "replica") if round_ % 2 == 0 else ("replica", "writer"):
                latencies, seen = await search_window(
                    apis[name], reader_user, args.window_s, args.concurrency, "eventual"
                )
                measured[name] += latencies
                spent[name] += args.window_s
                routes[name] += seen
        fresh_latencies, fresh = await search_window(
            apis["replica"], reader_user, args.window_s, args.concurrency, "indexed"
        )
        stop.set()
        await load
        lags = await lag

        print(f"\nimport into the writer: {counts['imported']} memories (with outbox rows)")
        print(f"{'reads on':<10}{'searches/s':>12}{'p50 ms':>9}{'p95 ms':>9}  answers")
        for name in ("writer", "replica"):
            values = measured[name]
            print(
                f"{name:<10}{len(values) / spent[name]:>12.1f}{pct(values, 50):>9.0f}"
                f"{pct(values, 95):>9.0f}  {dict(routes[name])}"
            )
        ratio = (len(measured["replica"]) / spent["replica"]) / (
            len(measured["writer"]) / spent["writer"]
        )
        print(f"throughput, replica / writer: {ratio:.2f}")
        print(
            f"replica lag (time to replay the writer's position), {len(lags)} samples: "
            f"p50 {pct(lags, 50):.1f} ms, p95 {pct(lags, 95):.1f} ms, max {max(lags):.0f} ms"
        )
        total = sum(fresh.values())
        fell_back = sum(n for (_, source, _), n in fresh.items() if source == "writer")
        print(
            f'consistency "indexed" on the replica process: {total} searches, '
            f"{fell_back} ({fell_back / max(total, 1):.1%}) served by the writer; "
            f"p50 {pct(fresh_latencies, 50):.0f} ms, p95 {pct(fresh_latencies, 95):.0f} ms; "
            f"{dict(fresh)}"
        )
    finally:
        async with httpx.AsyncClient(
            base_url=apis["writer"].url, headers={"X-API-Key": DEV_KEY}, timeout=600
        ) as http:
            for user in (reader_user, import_user):
                try:
                    await http.delete(f"/v1/users/{user}")
                except httpx.HTTPError as exc:
                    print(f"[cleanup] erasing {user} failed: {exc}")
        for api in apis.values():
            api.stop()
        await owner.dispose()
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--window-s", type=float, default=15, help="seconds per search window")
    parser.add_argument("--rounds", type=int, default=2, help="windows per process (alternated)")
    parser.add_argument("--concurrency", type=int, default=8, help="concurrent searches")
    return asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
