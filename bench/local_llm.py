"""Local LLM benchmark: start-up to ready, prompt and generation tokens/s, seconds per decision,
for each thread setting, with the real decision prompt.

    python -m bench.local_llm [--gguf PATH] [--threads 1,2] [--decisions 4] [--omp PASSIVE]

For each thread count: start `python -m app llm-serve` (as scripts/llm.sh does), time it until
/health answers 200, then send --decisions decision requests (the ingestion prompt with a few
candidate memories, schema-constrained, temperature 0) and read llama.cpp's own timings from
each answer. Also reports how many answers the guard accepted. Prints numbers; asserts nothing.
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
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import httpx

from app.ingest.context import message_context
from app.ingest.domain import Candidate, IncomingMessage
from app.ingest.guard import AnswerGuard, InvalidAnswer
from app.ingest.prompt import chat_messages, operation_schema
from app.vocabulary import SEED_CATEGORIES
from bench.ports import free_port

ROOT = Path(__file__).resolve().parent.parent
MESSAGES = (
    "I moved to Osaka last month.",
    "My sister just had a baby girl.",
    "I stopped eating meat in January.",
    "I'm starting a new job as a data analyst on Monday.",
    "We're flying to Lisbon for a week in June.",
    "I've been sleeping badly since the move.",
)
CANDIDATES = (
    ("I live in Tokyo.", "personal_details"),
    ("I work as a nurse.", "professional"),
    ("I'm vegetarian.", "dietary"),
)


def _candidates() -> list[Candidate]:
    return [
        Candidate(f"m{i}", uuid.uuid4(), text, category, "USER", None, None, 0.5)
        for i, (text, category) in enumerate(CANDIDATES, start=1)
    ]


@dataclass(frozen=True, slots=True)
class Served:
    url: str  # the server's root; its OpenAI-compatible API is under /v1
    ready_s: float  # from the process's start until /health answered 200
    pid: int

    def rss_mib(self) -> float:
        """The server's resident memory now (Linux /proc), in MiB."""
        status = Path(f"/proc/{self.pid}/status").read_text()
        kib = next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:"))
        return int(kib) / 1024


@contextmanager
def serving(gguf: str, threads: int, omp: str = "PASSIVE") -> Iterator[Served]:
    """`python -m app llm-serve` on a free port (as scripts/llm.sh starts it), until ready;
    terminated on leaving."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("COGNIS_")}
    env["OMP_WAIT_POLICY"] = omp
    started = time.perf_counter()
    process = subprocess.Popen(  # noqa: S603 - our own interpreter and module
        [sys.executable, "-m", "app", "llm-serve", "--gguf", gguf, "--port", str(port),
         "--threads", str(threads)],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        while process.poll() is None:
            try:
                if httpx.get(f"{url}/health", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        else:
            raise RuntimeError(f"llm-serve exited with {process.returncode} while loading {gguf}")
        yield Served(url, time.perf_counter() - started, process.pid)
    finally:
        process.terminate()
        process.wait(timeout=30)


def resolve_gguf(name: str) -> str:
    """A GGUF file, or a model's name that scripts/install-llm.sh installs (or checks)."""
    if Path(name).is_file():
        return name
    script = ROOT / "scripts" / "install-llm.sh"
    return subprocess.run(  # noqa: S603 - the project's own script
        ["/bin/bash", str(script), name], check=True, capture_output=True, text=True
    ).stdout.strip()


def measure(gguf: str, threads: int, decisions: int, omp: str, max_tokens: int) -> None:
    with (
        serving(gguf, threads, omp) as served,
        httpx.Client(base_url=served.url, timeout=600) as http,
    ):
        ready_s = served.ready_s
        prompt_tps, gen_tps, seconds, accepted = [], [], [], 0
        for i in range(decisions):
            text = MESSAGES[i % len(MESSAGES)]
            candidates = _candidates()
            context = message_context(
                "bench", None, IncomingMessage(text, sent_at=datetime.now(UTC)), None
            )
            body = {
                "model": "local",
                "messages": chat_messages(context, candidates, SEED_CATEGORIES),
                "temperature": 0,
                "max_tokens": max_tokens,
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {
                        "name": "memory_operations",
                        "schema": operation_schema(SEED_CATEGORIES),
                        "strict": True,
                    },
                },
            }
            t0 = time.perf_counter()
            answer = http.post("/v1/chat/completions", json=body).json()
            seconds.append(time.perf_counter() - t0)
            timings = answer.get("timings", {})
            prompt_tps.append(timings.get("prompt_per_second", 0.0))
            gen_tps.append(timings.get("predicted_per_second", 0.0))
            content = answer["choices"][0]["message"]["content"]
            try:
                AnswerGuard(context, candidates, SEED_CATEGORIES, 2000).parse(content)
                accepted += 1
            except InvalidAnswer:
                pass
        rss = served.rss_mib()
    print(
        f"| {threads} | {omp} | {ready_s:.1f} | {statistics.median(prompt_tps):.0f} | "
        f"{statistics.median(gen_tps):.1f} | {statistics.median(seconds):.2f} | "
        f"{accepted}/{decisions} | {rss:.0f} |",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gguf", default="smollm2", help="a GGUF file or a model's name")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--decisions", type=int, default=4)
    parser.add_argument("--omp", default="PASSIVE", help="OMP_WAIT_POLICY for the server")
    parser.add_argument("--max-tokens", type=int, default=200)
    args = parser.parse_args()
    args.gguf = resolve_gguf(args.gguf)
    print(f"model: {args.gguf}; {args.decisions} decisions per setting (medians)\n")
    print(
        "| threads | OMP_WAIT_POLICY | start to ready (s) | prompt tokens/s | "
        "generation tokens/s | s per decision | answers the guard accepted | server RSS (MiB) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for threads in (int(t) for t in args.threads.split(",")):
        measure(args.gguf, threads, args.decisions, args.omp, args.max_tokens)


if __name__ == "__main__":
    main()
