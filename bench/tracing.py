"""Search latency with tracing on against off (issue 44: "at most 5 % higher").

Two `python -m app serve` processes on the same stores and model service (`.local/cognis.env`,
as `make up` writes it), alike but for the OTEL_* variables: one exports every span over
OTLP/HTTP (protobuf) to a receiver in this process, which decodes each request as a
collector's receiver would; the other has no OTEL_* variable, so no SDK at all. Neither runs
background work (relay, workers): the seeded memories are indexed by `python -m app relay
--once` before the searches.

One user with LoCoMo turns; each question is asked of both APIs, in alternating order, so
the machine's noise (other processes, the model service) falls on both alike. Prints p50/p95
of the HTTP round trip and of the server's own `duration_ms` per API, their ratios on/off,
and the spans received. Asserts nothing; a 2-core machine shared with other work is noisy:
compare runs, and read the p50 ratio before the p95's.

    make bench-tracing BENCH_ARGS="--memories 300 --queries 200"
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from bench import as_client
from bench.foundation import locomo_turns_and_questions, percentile
from bench.ingestion import _start_api
from bench.otlp_receiver import OtlpReceiver

ROOT = Path(__file__).resolve().parent.parent
LOGS = Path(os.environ.get("COGNIS_LOCAL_DIR", ROOT / ".local")) / "logs"


@dataclass
class Timings:
    http_ms: list[float] = field(default_factory=list)
    server_ms: list[float] = field(default_factory=list)
    cpu_s: float = 0.0  # the API process's CPU over the timed searches

    def line(self) -> str:
        http, server = self.http_ms, self.server_ms
        return (
            f"HTTP p50 {percentile(http, 50):6.1f} ms  p95 {percentile(http, 95):6.1f} ms | "
            f"server p50 {percentile(server, 50):6.1f} ms  p95 {percentile(server, 95):6.1f} ms | "
            f"CPU {self.cpu_ms_per_search():5.1f} ms a search"
        )

    def cpu_ms_per_search(self) -> float:
        return self.cpu_s * 1000 / max(1, len(self.http_ms))


def _ratio(on: list[float], off: list[float], q: float) -> str:
    return f"{percentile(on, q) / percentile(off, q):.3f}"


def _paired(on: list[float], off: list[float]) -> str:
    """The median of each question's on/off ratio: both APIs answered it moments apart, so
    the machine's slow swings cancel out of each pair."""
    return f"{statistics.median(a / b for a, b in zip(on, off, strict=True)):.3f}"


def cpu_s(pid: int) -> float:
    """CPU seconds the process has used (user + system, all its threads: the exporter's too)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Api:
    url: str
    pid: int


@contextmanager
def api_process(name: str, env: dict[str, str]) -> Iterator[Api]:
    """A `python -m app serve` with `env`, once /ready, until the block ends."""
    LOGS.mkdir(parents=True, exist_ok=True)
    process, url = _start_api(env, LOGS / f"bench-tracing-{name}.log")
    try:
        yield Api(url, process.pid)
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()


def search(client: httpx.Client, user: str, question: str, timings: Timings) -> None:
    started = time.perf_counter()
    response = as_client.post_sync(
        client, f"/v1/users/{user}/search", json={"query": question, "top_k": 10}
    )
    timings.http_ms.append((time.perf_counter() - started) * 1000)
    timings.server_ms.append(response.json()["duration_ms"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--key", default=os.environ.get("COGNIS_API_KEY", "cognis-dev-key"))
    parser.add_argument("--memories", type=int, default=300)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20, help="questions asked first, not timed")
    parser.add_argument(
        "--traced-env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="more environment for the traced API, e.g. "
        "OTEL_PYTHON_DISABLED_INSTRUMENTATIONS=sqlalchemy (what each part costs)",
    )
    args = parser.parse_args()

    receiver = OtlpReceiver(keep=False)
    quiet = {
        **{k: v for k, v in os.environ.items() if not k.startswith("OTEL_")},
        "COGNIS_RELAY_IN_API": "false",
        "COGNIS_INGEST_WORKER_IN_API": "false",
        "COGNIS_LOG_LEVEL": "WARNING",
    }
    traced = {
        **quiet,
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
        "OTEL_SERVICE_NAME": "cognis-bench-traced",
        **dict(pair.split("=", 1) for pair in args.traced_env),
    }
    user = f"bench-tracing-{uuid.uuid4().hex[:8]}"
    turns, questions = locomo_turns_and_questions(args.memories)
    asked = questions[: args.warmup + args.queries]
    print(f"{len(turns)} memories for {user}, {args.queries} questions after {args.warmup} warm-up")
    with (
        api_process("off", quiet) as off_api,
        api_process("on", traced) as on_api,
        httpx.Client(base_url=off_api.url, headers={"X-API-Key": args.key}, timeout=120) as off,
        httpx.Client(base_url=on_api.url, headers={"X-API-Key": args.key}, timeout=120) as on,
    ):
        try:
            for offset in range(0, len(turns), 100):
                batch = [{"content": t} for t in turns[offset : offset + 100]]
                as_client.post_batch_sync(off, user, batch)
            relay = subprocess.run(
                [sys.executable, "-m", "app", "relay", "--once"],
                cwd=ROOT,
                env=quiet,
                capture_output=True,
                text=True,
                check=False,
            )
            print(f"indexed: {relay.stdout.strip() or relay.stderr.strip()[-300:]}")
            timings = {"off": Timings(), "on": Timings()}
            clients = {"off": off, "on": on}
            pids = {"off": off_api.pid, "on": on_api.pid}
            for i, question in enumerate(asked):
                if i == args.warmup:
                    cpu_at = {name: cpu_s(pid) for name, pid in pids.items()}
                order = ("on", "off") if i % 2 else ("off", "on")
                for name in order:
                    target = timings[name] if i >= args.warmup else Timings()
                    search(clients[name], user, question, target)
            for name, pid in pids.items():
                timings[name].cpu_s = cpu_s(pid) - cpu_at[name]
        finally:
            erased = off.delete(f"/v1/users/{user}")
            print(f"erased bench user: {erased.status_code}")
    # The traced API flushed its last spans as it stopped.
    received = receiver.received
    receiver.close()

    print(f"tracing off: {timings['off'].line()}")
    print(f"tracing on:  {timings['on'].line()}")
    on_t, off_t = timings["on"], timings["off"]
    print(
        f"ratio on/off: HTTP p50 {_ratio(on_t.http_ms, off_t.http_ms, 50)}, "
        f"p95 {_ratio(on_t.http_ms, off_t.http_ms, 95)}; server p50 "
        f"{_ratio(on_t.server_ms, off_t.server_ms, 50)}, "
        f"p95 {_ratio(on_t.server_ms, off_t.server_ms, 95)}; CPU a search "
        f"{on_t.cpu_ms_per_search() / off_t.cpu_ms_per_search():.3f}"
    )
    print(
        f"paired (median of each question's on/off): HTTP {_paired(on_t.http_ms, off_t.http_ms)}, "
        f"server {_paired(on_t.server_ms, off_t.server_ms)}"
    )
    load = os.getloadavg()[0]
    print(f"load average at the end: {load:.1f} on {os.cpu_count()} cores")
    searches = len(asked)
    print(f"spans received: {received} ({received / searches:.1f} per search, warm-up included)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
