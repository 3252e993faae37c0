"""Ingestion benchmark: messages per second and time-to-searchable, with the deterministic
extractor and with a scripted OpenAI-compatible LLM that answers after an artificial latency.

For each mode the bench starts its own API process (own job queue, so a running `make up`
service does not take its jobs) against COGNIS_DATABASE_URL / COGNIS_OPENSEARCH_URL, submits
LoCoMo turns (read from ../shared/data, each tagged with a unique token) for several users from
concurrent clients, one message per request, and measures:

- accepted/s: how fast POST /messages answers 202 (step 1: embed + save);
- applied/s: messages turned into memories per second, first submission to last memory;
- time-to-searchable: 202 received -> the memory findable through BOTH search legs: current in
  Postgres (the vector leg reads it there) and returned by an OpenSearch BM25 query for its
  token, filtered by user (refresh interval included).

Bench users are erased at the end. Prints numbers; asserts nothing. Not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from bench.foundation import locomo_turns_and_questions, summary
from tests.ingest.scripted_llm import RecordedRequest, Reply, ScriptedLLM

ROOT = Path(__file__).resolve().parent.parent
API_KEY = "cognis-dev-key"


@dataclass
class Probe:
    user_id: str
    token: str
    accepted_at: float = 0.0
    message_id: str | None = None
    in_postgres: bool = False
    searchable_at: float | None = None


@dataclass
class ModeResult:
    name: str
    accepted_per_s: float
    applied_per_s: float
    to_searchable_ms: list[float] = field(default_factory=list)
    missing: int = 0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start_api(env: dict[str, str], log_path: Path) -> tuple[subprocess.Popen, str]:
    port = _free_port()
    log = log_path.open("w")
    process = subprocess.Popen(  # noqa: S603 - our own interpreter and module
        [sys.executable, "-m", "app", "serve", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and process.poll() is None:
        try:
            if httpx.get(f"{url}/ready", timeout=2).status_code == 200:
                return process, url
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    process.terminate()
    raise RuntimeError(f"API did not start; see {log_path}")


def _echo_responder(latency_s: float):
    """An LLM that turns every message into one ADD of its own text, after `latency_s`."""

    def respond(request: RecordedRequest) -> Reply:
        return Reply.ops(
            {"op": "ADD", "content": request.new_message, "category": "preferences"},
            delay_s=latency_s,
        )

    return respond


async def _watch(probes: list[Probe], env: dict[str, str], index: str, timeout_s: float) -> None:
    """Poll both legs until every probe is searchable (or the timeout passes)."""
    engine = create_async_engine(env["COGNIS_DATABASE_URL"])
    opensearch = httpx.AsyncClient(base_url=env["COGNIS_OPENSEARCH_URL"], timeout=10)
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            waiting = [p for p in probes if p.message_id and p.searchable_at is None]
            unsent = [p for p in probes if not p.message_id]
            if not waiting and not unsent:
                return
            ids = [p.message_id for p in waiting if not p.in_postgres]
            if ids:
                async with engine.connect() as connection:
                    found = {
                        str(row[0])
                        for row in await connection.execute(
                            text(
                                "SELECT source_message_id FROM memories WHERE is_current "
                                "AND source_message_id = ANY(CAST(:ids AS uuid[]))"
                            ),
                            {"ids": ids},
                        )
                    }
                for probe in waiting:
                    probe.in_postgres = probe.in_postgres or probe.message_id in found
            for probe in [p for p in waiting if p.in_postgres]:
                query = {
                    "size": 1,
                    "query": {
                        "bool": {
                            "must": [{"match": {"content": probe.token}}],
                            "filter": [
                                {"term": {"user_id": probe.user_id}},
                                {"term": {"is_current": True}},
                            ],
                        }
                    },
                }
                hits = (await opensearch.post(f"/{index}/_search", json=query)).json()
                if hits.get("hits", {}).get("hits"):
                    probe.searchable_at = time.perf_counter()
            await asyncio.sleep(0.02)
    finally:
        await opensearch.aclose()
        await engine.dispose()


async def _drive(url: str, probes: list[Probe], turns: list[str], concurrency: int) -> float:
    """Submit one message per request from `concurrency` clients; returns accepted/s."""
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(len(probes)):
        queue.put_nowait(i)

    async def client() -> None:
        async with httpx.AsyncClient(
            base_url=url, headers={"X-API-Key": API_KEY}, timeout=120
        ) as http:
            while not queue.empty():
                i = queue.get_nowait()
                probe = probes[i]
                content = f"{turns[i]} (ref {probe.token})"
                response = await http.post(
                    f"/v1/users/{probe.user_id}/messages",
                    json={"messages": [{"content": content}]},
                )
                response.raise_for_status()
                probe.accepted_at = time.perf_counter()
                probe.message_id = response.json()["submitted"][0]["message_id"]

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(concurrency)))
    return len(probes) / (time.perf_counter() - started)


async def run_mode(name: str, args: argparse.Namespace, turns: list[str]) -> ModeResult:
    env = {k: v for k, v in os.environ.items()}
    index = env.get("COGNIS_OPENSEARCH_INDEX", "cognis-memories")
    env.update(
        {
            "COGNIS_API_KEY_HASHES": "",
            "COGNIS_INGEST_QUEUE": f"bench-{uuid.uuid4().hex[:8]}",
            "COGNIS_INGEST_WORKER_CONCURRENCY": str(args.workers),
            "COGNIS_INGEST_POLL_INTERVAL_S": "0.2",
            "COGNIS_LOG_LEVEL": "WARNING",
            "COGNIS_LOG_JSON": "true",
        }
    )
    llm = None
    if name == "llm":
        llm = ScriptedLLM(default=_echo_responder(args.llm_latency_ms / 1000))
        env.update({"COGNIS_LLM_BASE_URL": llm.base_url, "COGNIS_LLM_MODEL": llm.model})
    else:
        env.pop("COGNIS_LLM_BASE_URL", None)
    log_path = ROOT / ".local" / "logs" / f"bench-ingest-{name}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    process, url = _start_api(env, log_path)
    users = [f"bench-ingest-{uuid.uuid4().hex[:8]}-{i}" for i in range(args.users)]
    probes = [
        Probe(user_id=users[i % len(users)], token=f"zq{uuid.uuid4().hex[:10]}")
        for i in range(len(turns))
    ]
    try:
        started = time.perf_counter()
        watcher = asyncio.create_task(_watch(probes, env, index, timeout_s=args.timeout_s))
        accepted_per_s = await _drive(url, probes, turns, args.concurrency)
        await watcher
        done = [p for p in probes if p.searchable_at is not None]
        last = max((p.searchable_at for p in done), default=time.perf_counter())
        return ModeResult(
            name=name,
            accepted_per_s=accepted_per_s,
            applied_per_s=len(done) / (last - started),
            to_searchable_ms=[(p.searchable_at - p.accepted_at) * 1000 for p in done],  # type: ignore[operator]
            missing=len(probes) - len(done),
        )
    finally:
        async with httpx.AsyncClient(
            base_url=url, headers={"X-API-Key": API_KEY}, timeout=60
        ) as http:
            for user in users:
                await http.delete(f"/v1/users/{user}")
        process.terminate()
        process.wait(timeout=30)
        if llm is not None:
            llm.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=200)
    parser.add_argument("--users", type=int, default=8, help="messages are spread over users")
    parser.add_argument("--concurrency", type=int, default=4, help="concurrent HTTP clients")
    parser.add_argument("--workers", type=int, default=4, help="ingestion loops in the API")
    parser.add_argument("--llm-latency-ms", type=float, default=300.0)
    parser.add_argument("--modes", default="deterministic,llm")
    parser.add_argument("--timeout-s", type=float, default=300.0)
    args = parser.parse_args()
    if "COGNIS_DATABASE_URL" not in os.environ:
        print("COGNIS_DATABASE_URL is not set (make bench-ingest reads .local/cognis.env)")
        return 2
    subprocess.run([sys.executable, "-m", "app", "migrate"], cwd=ROOT, check=True)
    turns, _ = locomo_turns_and_questions(args.messages)
    for name in args.modes.split(","):
        label = name if name != "llm" else f"llm (scripted, {args.llm_latency_ms:.0f} ms/answer)"
        print(
            f"== {label}: {len(turns)} messages, {args.users} users, "
            f"{args.concurrency} clients, {args.workers} worker loops",
            flush=True,
        )
        result = asyncio.run(run_mode(name, args, turns))
        print(f"accepted: {result.accepted_per_s:.1f} messages/s (POST -> 202)")
        print(f"applied:  {result.applied_per_s:.1f} messages/s (first POST -> last searchable)")
        if result.to_searchable_ms:
            print(f"time-to-searchable (202 -> both legs): {summary(result.to_searchable_ms)}")
        if result.missing:
            print(f"not searchable within {args.timeout_s:.0f} s: {result.missing}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
