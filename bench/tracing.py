"""Search latency with tracing on against off (issue 44: "at most 5 % higher").

Two `python -m app serve` processes on the same stores and model service (`.local/cognis.env`,
as `make up` writes it), alike but for the OTEL_* variables: one exports every span over
OTLP/HTTP (protobuf) to a receiver in this process, which decodes each request as a
collector's receiver would; the other has no OTEL_* variable, so no SDK at all. Neither runs
background work (relay, workers): the seeded memories are indexed by `python -m app relay
--once` before the searches.

One user with LoCoMo turns; each question is asked of both APIs, in alternating order, so
the machine's noise (other processes, the model service) falls on both alike, and the whole
set of questions is asked again in each of `--rounds` rounds. Prints, per round and over all,
p50/p95 of the HTTP round trip and of the server's own `duration_ms` per API, their ratios
on/off, the median of each question's paired ratio, each API's CPU per search, and the spans
received. Asserts nothing; a 2-core machine shared with other work is noisy: read the p50 and
paired ratios before the p95's, and the spread of the rounds.

    make bench-tracing BENCH_ARGS="--memories 300 --queries 200 --rounds 3"
"""

from __future__ import annotations

import argparse
import contextlib
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


def variants(specs: list[str], traced_env: list[str]) -> dict[str, dict[str, str]]:
    """The traced APIs to run beside the untraced one, by label: `on` (every span, with
    `--traced-env`) unless `--variant LABEL:NAME=VALUE;NAME=VALUE` names others."""
    if not specs:
        return {"on": dict(pair.split("=", 1) for pair in traced_env)}
    found = {}
    for spec in specs:
        label, _, pairs = spec.partition(":")
        found[label] = dict(pair.split("=", 1) for pair in pairs.split(";") if pair)
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--key", default=os.environ.get("COGNIS_API_KEY", "cognis-dev-key"))
    parser.add_argument("--memories", type=int, default=300)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20, help="questions asked first, not timed")
    parser.add_argument("--rounds", type=int, default=3, help="times the questions are asked")
    parser.add_argument(
        "--traced-env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="more environment for the traced API, e.g. "
        "OTEL_PYTHON_DISABLED_INSTRUMENTATIONS=sqlalchemy (what each part costs)",
    )
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="LABEL:NAME=VALUE;...",
        help="a traced API of its own, with this environment added (repeatable; each is "
        "asked every question beside the others), e.g. "
        "'no-sql:OTEL_PYTHON_DISABLED_INSTRUMENTATIONS=sqlalchemy'; default: one, `on`",
    )
    args = parser.parse_args()

    receiver = OtlpReceiver(keep=False)
    quiet = {
        **{k: v for k, v in os.environ.items() if not k.startswith("OTEL_")},
        "COGNIS_RELAY_IN_API": "false",
        "COGNIS_INGEST_WORKER_IN_API": "false",
        "COGNIS_LOG_LEVEL": "WARNING",
    }
    envs = {"off": quiet}
    for label, extra in variants(args.variant, args.traced_env).items():
        envs[label] = {
            **quiet,
            "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
            "OTEL_SERVICE_NAME": f"cognis-bench-{label}",
            **extra,
        }
    names = list(envs)
    user = f"bench-tracing-{uuid.uuid4().hex[:8]}"
    turns, questions = locomo_turns_and_questions(args.memories)
    asked = questions[: args.warmup + args.queries]
    print(f"{len(turns)} memories for {user}, {args.queries} questions after {args.warmup} warm-up")
    for label, env in envs.items():
        otel = {k: v for k, v in env.items() if k.startswith("OTEL_") and "ENDPOINT" not in k}
        print(f"  API {label}: {otel or 'no OTEL_* variable'}")
    with contextlib.ExitStack() as stack:
        apis = {name: stack.enter_context(api_process(name, env)) for name, env in envs.items()}
        clients = {
            name: stack.enter_context(
                httpx.Client(base_url=api.url, headers={"X-API-Key": args.key}, timeout=120)
            )
            for name, api in apis.items()
        }
        off = clients["off"]
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
            for question in asked[: args.warmup]:
                for name in names:
                    search(clients[name], user, question, Timings())
            timed = asked[args.warmup :]
            rounds = []
            for n in range(args.rounds):
                timings = {name: Timings() for name in names}
                cpu_at = {name: cpu_s(api.pid) for name, api in apis.items()}
                for i, question in enumerate(timed):
                    # Each API first, second, ... in turn: no place in the order is one's own.
                    shift = (i + n) % len(names)
                    for name in names[shift:] + names[:shift]:
                        search(clients[name], user, question, timings[name])
                for name, api in apis.items():
                    timings[name].cpu_s = cpu_s(api.pid) - cpu_at[name]
                report(f"round {n + 1}", timings)
                rounds.append(timings)
        finally:
            erased = off.delete(f"/v1/users/{user}")
            print(f"erased bench user: {erased.status_code}")
    # The traced APIs flushed their last spans as they stopped.
    received = receiver.received
    receiver.close()

    report(f"all {args.rounds} rounds", {name: merged(rounds, name) for name in names})
    load = os.getloadavg()
    print(f"load average at the end: {load[0]:.1f} (5 min {load[1]:.1f}) on {os.cpu_count()} cores")
    searches = (len(asked) - args.warmup) * args.rounds + args.warmup
    traced_apis = len(names) - 1
    print(
        f"spans received: {received} ({received / searches / traced_apis:.1f} per search of a "
        "traced API, warm-up included)"
    )
    return 0


def merged(rounds: list[dict[str, Timings]], name: str) -> Timings:
    return Timings(
        http_ms=[ms for r in rounds for ms in r[name].http_ms],
        server_ms=[ms for r in rounds for ms in r[name].server_ms],
        cpu_s=sum(r[name].cpu_s for r in rounds),
    )


def report(label: str, timings: dict[str, Timings]) -> None:
    off_t = timings["off"]
    print(f"{label}:")
    for name, t in timings.items():
        print(f"  {name:>12}: {t.line()}")
    for name, on_t in timings.items():
        if name == "off":
            continue
        print(
            f"  {name}/off: HTTP p50 {_ratio(on_t.http_ms, off_t.http_ms, 50)}, "
            f"p95 {_ratio(on_t.http_ms, off_t.http_ms, 95)}; server p50 "
            f"{_ratio(on_t.server_ms, off_t.server_ms, 50)}, "
            f"p95 {_ratio(on_t.server_ms, off_t.server_ms, 95)}; CPU a search "
            f"{on_t.cpu_ms_per_search() / off_t.cpu_ms_per_search():.3f}; paired (median of "
            f"each question's ratio) HTTP {_paired(on_t.http_ms, off_t.http_ms)}, server "
            f"{_paired(on_t.server_ms, off_t.server_ms)}",
            flush=True,
        )


if __name__ == "__main__":
    sys.exit(main())
