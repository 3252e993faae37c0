"""Write-path benchmark: the model's own limit and what the service makes of it, in one run.

1. raw: the configured model's batched throughput on the same LoCoMo turns, in this process
   (texts/s; all turns in one call, sorted by length, forward passes of the configured size) -
   the physical limit every other figure is a fraction of;
2. batch create: POST /memories/batch (100 per request, category given), memories/s; and
   (mode "chat") what a chat back end meets: the first 100 turns of a LoCoMo conversation in one
   batch, each with its session and speaker (so most carry their previous turns as context, a
   second text for the model), on the idle service: its answer and time;
3. messages at full speed: one message per request from concurrent clients, deterministic
   extractor; accepted/s (202) and applied/s (first POST -> last memory searchable), with the
   model calls and the claims (one transaction each) the API counted for them; then the same
   with several messages per request (--per-request, mode "several");
4. messages at half that rate (offered load = 0.5 x applied/s): time-to-searchable (202 -> the
   memory current in Postgres, which the vector leg reads, AND returned by an OpenSearch BM25
   query for its token), while one client searches with fresh queries; search latency is also
   measured on the idle service first;
5. (mode "submit") POST /messages latency, one message per request from one client, while two
   clients keep the model saturated with batch creates: p50/p95 of the 202, against the same
   submits on the idle model (issue 41: step 1 makes no model call, so the 202 does not wait
   for it);
6. optionally (--modes ...,llm) the message path with a scripted OpenAI-compatible LLM.

The bench starts its own API process (own job queue, so a running `make up` service does not
take its jobs) with the environment's database URLs (request, worker and migration roles) and
COGNIS_OPENSEARCH_URL; its users are the default tenant's (the development key). With `make
up`'s environment it embeds through the machine's model service, like every process there; the
report says whether `make up`'s API and model service were running beside it, and ends with
each process's resident memory. Before raw it waits (--quiet-timeout-s) until the model
service and the machine are idle (a sentence backlog embedding in the background made raw a
fraction of the model's limit) and prints what it found, or that it measured anyway. Its
clients behave as clients should (bench/as_client.py):
busy answers are waited out after Retry-After and a batch refused for size is split; the
report counts both. LoCoMo turns
are read from ../shared/data (each tagged with a unique token). Bench users are erased at the
end. Prints numbers; asserts nothing. Not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from app.config import get_settings
from app.ml.embedder import Embedder
from bench import as_client
from bench.database import default_tenant
from bench.foundation import locomo_turns_and_questions, percentile, summary
from bench.ports import free_port
from bench.processes import describe_neighbours, resident_memory, wait_for_quiet
from bench.scripted_llm import RecordedRequest, Reply, ScriptedLLM

ROOT = Path(__file__).resolve().parent.parent
API_KEY = "cognis-dev-key"
HEADERS = {"X-API-Key": API_KEY}


@dataclass
class Probe:
    user_id: str
    token: str
    accepted_at: float = 0.0
    message_id: str | None = None
    in_postgres: bool = False
    searchable_at: float | None = None


@dataclass
class MessageRun:
    accepted_per_s: float
    applied_per_s: float
    to_searchable_ms: list[float] = field(default_factory=list)
    missing: int = 0


def _start_api(env: dict[str, str], log_path: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    log = log_path.open("w")
    process = subprocess.Popen(  # noqa: S603 - our own interpreter and module
        [sys.executable, "-m", "app", "serve", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and process.poll() is None:
        try:
            if httpx.get(f"{url}/ready", timeout=2).status_code == 200:
                return process, url
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    process.terminate()
    raise RuntimeError(f"API did not start; see {log_path}")


def raw_throughput(turns: list[str], batch: int) -> float:
    """Texts/s of the configured model alone, in this process: the best case of the service's
    own settings (the model service's backend where processes embed through it)."""
    settings = get_settings()
    backend = settings.embedding.embedding_backend
    if backend == "http":  # the model service runs torch unless told otherwise
        backend = os.environ.get("COGNIS_EMBED_SERVE_BACKEND", "torch")  # type: ignore[assignment]
    embedder = Embedder(
        settings.embedding.embedding_model,
        forward_batch_size=batch,
        backend=backend,
        intra_op_threads=settings.embedding.embedding_intra_op_threads,
        onnx_cache_dir=settings.embedding.embedding_onnx_cache_dir,
    )
    embedder.load()
    embedder.embed_sync(turns[:batch])  # warm-up
    # One call for everything: sorted by length, passes of `batch`: the least padding possible.
    started = time.perf_counter()
    embedder.embed_sync(turns)
    return len(turns) / (time.perf_counter() - started)


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
                async with default_tenant(engine) as session:
                    found = {
                        str(row[0])
                        for row in await session.execute(
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


async def _submit(http: httpx.AsyncClient, probes: list[Probe], turns: list[str]) -> None:
    """One request carrying these messages (each its own probe)."""
    response = await as_client.post(
        http,
        f"/v1/users/{probes[0].user_id}/messages",
        json={
            "messages": [
                {"content": f"{turn} (ref {probe.token})"}
                for probe, turn in zip(probes, turns, strict=True)
            ]
        },
    )
    accepted_at = time.perf_counter()
    for probe, submitted in zip(probes, response.json()["submitted"], strict=True):
        probe.accepted_at = accepted_at
        probe.message_id = submitted["message_id"]


async def _drive(
    url: str, probes: list[Probe], turns: list[str], concurrency: int, per_request: int
) -> float:
    """Submit `per_request` messages (of one user) per request from `concurrency` clients;
    returns accepted/s."""
    groups: dict[str, list[int]] = {}
    for i, probe in enumerate(probes):
        groups.setdefault(probe.user_id, []).append(i)
    queue: asyncio.Queue[list[int]] = asyncio.Queue()
    for indices in groups.values():
        for start in range(0, len(indices), per_request):
            queue.put_nowait(indices[start : start + per_request])

    async def client() -> None:
        async with httpx.AsyncClient(base_url=url, headers=HEADERS, timeout=120) as http:
            while not queue.empty():
                chunk = queue.get_nowait()
                await _submit(http, [probes[i] for i in chunk], [turns[i] for i in chunk])

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(concurrency)))
    return len(probes) / (time.perf_counter() - started)


async def _paced(url: str, probes: list[Probe], turns: list[str], rate: float) -> None:
    """Offer messages at a fixed rate (one request each, on schedule, however slow the last)."""
    async with httpx.AsyncClient(base_url=url, headers=HEADERS, timeout=120) as http:
        started = time.perf_counter()
        tasks = []
        for i, probe in enumerate(probes):
            delay = started + i / rate - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(_submit(http, [probe], [turns[i]])))
        await asyncio.gather(*tasks)


async def _search_loop(
    url: str, user_id: str, questions: list[str], stop: asyncio.Event, limit: int
) -> list[float]:
    """One client searching with fresh queries until `stop` (or `limit` searches)."""
    latencies: list[float] = []
    async with httpx.AsyncClient(base_url=url, headers=HEADERS, timeout=60) as http:
        for question in questions[:limit]:
            if stop.is_set():
                break
            started = time.perf_counter()
            await as_client.post(
                http, f"/v1/users/{user_id}/search", json={"query": question, "top_k": 10}
            )
            latencies.append((time.perf_counter() - started) * 1000)
    return latencies


@dataclass(frozen=True)
class WorkCounts:
    """Countable work of the API (from its /metrics): model calls, ingestion claims (one
    transaction each, of one or several users), and the users' batches, each applied in one
    transaction, with the messages they carried."""

    model_calls: float
    claims: float
    batches: float
    claimed_messages: float
    model_texts: float = 0.0  # texts the model embedded (the API process's memory embedder)

    def __sub__(self, other: WorkCounts) -> WorkCounts:
        return WorkCounts(
            self.model_calls - other.model_calls,
            self.claims - other.claims,
            self.batches - other.batches,
            self.claimed_messages - other.claimed_messages,
            self.model_texts - other.model_texts,
        )

    def describe(self, messages: int) -> str:
        per = max(messages, 1)
        return (
            f"{self.model_texts:.0f} model texts ({self.model_texts / per:.2f} a message) in "
            f"{self.model_calls:.0f} model calls ({self.model_calls / per:.2f} a message), "
            f"{self.claims:.0f} claims ({self.claims / per:.2f} a message) and "
            f"{self.batches:.0f} apply transactions ({self.batches / per:.2f} a message, "
            f"{self.claimed_messages / max(self.batches, 1):.1f} messages on average) for "
            f"{messages} messages"
        )


async def _work_counts(url: str) -> WorkCounts:
    async with httpx.AsyncClient(base_url=url, headers=HEADERS, timeout=30) as http:
        body = (await http.get("/metrics")).text
    values: dict[str, float] = {}
    for family in text_string_to_metric_families(body):
        for sample in family.samples:
            if sample.labels.get("embedder", "memories") == "memories":
                values[sample.name] = values.get(sample.name, 0.0) + sample.value
    batches = values.get("cognis_ingest_batch_messages_count", 0.0)
    return WorkCounts(
        values.get("cognis_embedding_batches_total", 0.0),
        # A service without grouped claims (before issue 45) made one claim per batch.
        values.get("cognis_ingest_claim_users_count", batches),
        batches,
        values.get("cognis_ingest_batch_messages_sum", 0.0),
        values.get("cognis_embedding_texts_total", 0.0),
    )


async def _messages(
    url: str,
    env: dict[str, str],
    turns: list[str],
    users: list[str],
    args: argparse.Namespace,
    per_request: int = 1,
) -> MessageRun:
    index = env.get("COGNIS_OPENSEARCH_INDEX", "cognis-memories")
    probes = [
        Probe(user_id=users[i % len(users)], token=f"zq{uuid.uuid4().hex[:10]}")
        for i in range(len(turns))
    ]
    before = await _work_counts(url)
    started = time.perf_counter()
    watcher = asyncio.create_task(_watch(probes, env, index, timeout_s=args.timeout_s))
    accepted_per_s = await _drive(url, probes, turns, args.concurrency, per_request)
    await watcher
    run = _result(probes, started, accepted_per_s)
    print(f"  work: {(await _work_counts(url) - before).describe(len(probes))}", flush=True)
    return run


def _result(probes: list[Probe], started: float, accepted_per_s: float) -> MessageRun:
    done = [p for p in probes if p.searchable_at is not None]
    last = max((p.searchable_at for p in done if p.searchable_at), default=time.perf_counter())
    return MessageRun(
        accepted_per_s=accepted_per_s,
        applied_per_s=len(done) / (last - started),
        to_searchable_ms=[(p.searchable_at - p.accepted_at) * 1000 for p in done],  # type: ignore[operator]
        missing=len(probes) - len(done),
    )


async def _chat_batch(url: str, user_id: str) -> None:
    """One chat back end's batch of 100 turns with sessions and speakers, first as sent (its
    answer), then as a client completes it (splitting a 413)."""
    from bench.locomo import load_conversations  # only this mode reads whole conversations

    (conversation,) = load_conversations(1)
    turns = conversation.turns[:100]
    size = sum(len(t["content"]) for t in turns)
    async with httpx.AsyncClient(base_url=url, headers=HEADERS, timeout=600) as http:
        started = time.perf_counter()
        first = await http.post(f"/v1/users/{user_id}/memories/batch", json={"memories": turns})
        took = time.perf_counter() - started
        answer = f"{first.status_code}"
        if first.status_code >= 400:
            answer += f" {first.json().get('detail', '')[:160]!r}"
            await as_client.post_batch(http, user_id, turns)
            took = time.perf_counter() - started
        print(
            f"chat batch (100 turns with sessions and speakers, {size / 1000:.0f} KB): "
            f"first answer {answer}; all written in {took:.1f} s",
            flush=True,
        )


async def _batch_create(url: str, user_id: str, turns: list[str], concurrency: int) -> float:
    """memories/s through POST /memories/batch, 100 per request, category given."""
    chunks = [turns[i : i + 100] for i in range(0, len(turns), 100)]
    queue: asyncio.Queue[list[str]] = asyncio.Queue()
    for chunk in chunks:
        queue.put_nowait(chunk)

    async def client() -> None:
        async with httpx.AsyncClient(base_url=url, headers=HEADERS, timeout=600) as http:
            while not queue.empty():
                chunk = queue.get_nowait()
                memories = [{"content": t, "category": "hobbies"} for t in chunk]
                await as_client.post_batch(http, user_id, memories)

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(concurrency)))
    return len(turns) / (time.perf_counter() - started)


def _bench_env(args: argparse.Namespace) -> dict[str, str]:
    env = dict(os.environ)
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
    env.pop("COGNIS_LLM_BASE_URL", None)
    return env


async def _message_modes(
    url: str,
    env: dict[str, str],
    args: argparse.Namespace,
    turns: list[str],
    questions: list[str],
    users: list[str],
    several_users: list[str],
    paced_users: list[str],
) -> None:
    """Messages at full speed (one and several per request), idle search, then messages at
    half that speed with a client searching."""
    full = await _messages(url, env, turns, users, args)
    print(
        f"messages, full speed: accepted {full.accepted_per_s:.1f}/s, applied "
        f"{full.applied_per_s:.1f}/s ({full.applied_per_s / args.raw:.2f} of raw)",
        flush=True,
    )
    print(f"  time-to-searchable: {summary(full.to_searchable_ms)}", flush=True)
    if full.missing:
        print(f"  not searchable within {args.timeout_s:.0f} s: {full.missing}")

    if "several" in args.modes:
        several = await _messages(url, env, turns, several_users, args, args.per_request)
        print(
            f"messages, {args.per_request} per request: accepted "
            f"{several.accepted_per_s:.1f}/s, applied {several.applied_per_s:.1f}/s "
            f"({several.applied_per_s / args.raw:.2f} of raw)",
            flush=True,
        )

    idle = await _search_loop(url, users[0], questions, asyncio.Event(), args.searches)
    print(f"search, idle (fresh queries): {summary(idle)}", flush=True)

    rate = 0.5 * full.applied_per_s
    paced_turns = turns[: args.paced_messages]
    probes = [
        Probe(user_id=paced_users[i % len(paced_users)], token=f"zq{uuid.uuid4().hex[:10]}")
        for i in range(len(paced_turns))
    ]
    index = env.get("COGNIS_OPENSEARCH_INDEX", "cognis-memories")
    stop = asyncio.Event()
    started = time.perf_counter()
    watcher = asyncio.create_task(_watch(probes, env, index, timeout_s=args.timeout_s))
    searches = asyncio.create_task(
        _search_loop(url, users[0], questions[args.searches :], stop, 10_000)
    )
    await _paced(url, probes, paced_turns, rate)
    await watcher
    stop.set()
    busy = await searches
    paced = _result(probes, started, rate)
    print(
        f"messages at half speed ({rate:.1f}/s offered, {len(probes)} messages): "
        f"time-to-searchable {summary(paced.to_searchable_ms)}",
        flush=True,
    )
    if busy:
        ratio = percentile(busy, 95) / percentile(idle, 95)
        print(f"search while ingesting: {summary(busy)}; p95 {ratio:.2f}x idle", flush=True)


async def _submit_latencies(url: str, user_id: str, turns: list[str]) -> list[float]:
    """ms per POST /messages (one message each, one client, in sequence) until 202."""
    latencies: list[float] = []
    async with httpx.AsyncClient(base_url=url, headers=HEADERS, timeout=120) as http:
        for turn in turns:
            started = time.perf_counter()
            response = await as_client.post(
                http, f"/v1/users/{user_id}/messages", json={"messages": [{"content": turn}]}
            )
            latencies.append((time.perf_counter() - started) * 1000)
            assert response.status_code == 202, response.text
    return latencies


async def _submit_while_busy(url: str, tag: str, turns: list[str], submits: int) -> list[str]:
    """POST /messages p50/p95 on the idle model, then while batch creates saturate it."""
    idle_user, busy_user, load_user = (f"bench-submit-{tag}-{n}" for n in ("idle", "busy", "load"))
    idle = await _submit_latencies(url, idle_user, turns[:submits])
    load = asyncio.create_task(_batch_create(url, load_user, turns * 3, 2))
    await asyncio.sleep(2)  # the batch creates reach the model first
    busy = await _submit_latencies(url, busy_user, turns[submits : 2 * submits])
    saturated = not load.done()
    await load
    print(f"POST /messages, idle model: {summary(idle)}", flush=True)
    print(
        f"POST /messages, model saturated by batch creates{'' if saturated else ' (ended early)'}"
        f": {summary(busy)}; p95 {percentile(busy, 95) / percentile(idle, 95):.2f}x idle",
        flush=True,
    )
    return [idle_user, busy_user, load_user]


async def _erase(url: str, users: list[str]) -> None:
    async with httpx.AsyncClient(base_url=url, headers=HEADERS, timeout=120) as http:
        for user in users:
            await http.delete(f"/v1/users/{user}")


async def deterministic(args: argparse.Namespace, turns: list[str], questions: list[str]) -> None:
    env = _bench_env(args)
    log_path = ROOT / ".local" / "logs" / "bench-ingest.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    process, url = _start_api(env, log_path)
    tag = uuid.uuid4().hex[:8]
    batch_user = f"bench-batch-{tag}"
    users = [f"bench-ingest-{tag}-{i}" for i in range(args.users)]
    paced_users = [f"bench-paced-{tag}-{i}" for i in range(args.users)]
    several_users = [f"bench-several-{tag}-{i}" for i in range(args.users)]
    submit_users: list[str] = []
    try:
        if "submit" in args.modes:
            submit_users = await _submit_while_busy(url, tag, turns, args.submits)
        if "chat" in args.modes:
            await _chat_batch(url, f"bench-chat-{tag}")
        if "batch" in args.modes:
            rate = await _batch_create(url, batch_user, turns, 2)
            print(f"batch create: {rate:.1f} memories/s ({rate / args.raw:.2f} of raw)", flush=True)
        if "messages" in args.modes:
            await _message_modes(
                url, env, args, turns, questions, users, several_users, paced_users
            )
        print(f"clients: {as_client.RETRIES.describe()}", flush=True)
        print(f"resident memory: {resident_memory({'bench API': process.pid})}", flush=True)
    finally:
        await _erase(
            url,
            [
                batch_user,
                f"bench-chat-{tag}",
                *users,
                *paced_users,
                *several_users,
                *submit_users,
            ],
        )
        process.terminate()
        process.wait(timeout=30)


async def scripted_llm(args: argparse.Namespace, turns: list[str]) -> None:
    llm = ScriptedLLM(default=_echo_responder(args.llm_latency_ms / 1000))
    env = _bench_env(args)
    env.update({"COGNIS_LLM_BASE_URL": llm.base_url, "COGNIS_LLM_MODEL": llm.model})
    log_path = ROOT / ".local" / "logs" / "bench-ingest-llm.log"
    process, url = _start_api(env, log_path)
    users = [f"bench-ingest-llm-{uuid.uuid4().hex[:8]}-{i}" for i in range(args.users)]
    try:
        result = await _messages(url, env, turns, users, args)
        print(
            f"messages, scripted LLM ({args.llm_latency_ms:.0f} ms/answer): accepted "
            f"{result.accepted_per_s:.1f}/s, applied {result.applied_per_s:.1f}/s; "
            f"time-to-searchable {summary(result.to_searchable_ms)}",
            flush=True,
        )
    finally:
        await _erase(url, users)
        process.terminate()
        process.wait(timeout=30)
        llm.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=400)
    parser.add_argument("--paced-messages", type=int, default=120)
    parser.add_argument("--users", type=int, default=8, help="messages are spread over users")
    parser.add_argument("--concurrency", type=int, default=8, help="concurrent HTTP clients")
    parser.add_argument("--workers", type=int, default=4, help="ingestion loops in the API")
    parser.add_argument("--searches", type=int, default=100, help="idle searches")
    parser.add_argument("--llm-latency-ms", type=float, default=300.0)
    parser.add_argument(
        "--per-request", type=int, default=10, help="messages per request (several)"
    )
    parser.add_argument("--submits", type=int, default=60, help="submits per phase (submit)")
    parser.add_argument("--modes", default="raw,chat,batch,messages,several,submit")
    parser.add_argument("--timeout-s", type=float, default=300.0)
    parser.add_argument(
        "--quiet-timeout-s",
        type=float,
        default=300.0,
        help="wait this long at most for an idle model service and machine before raw",
    )
    args = parser.parse_args()
    if "COGNIS_DATABASE_URL" not in os.environ:
        print("COGNIS_DATABASE_URL is not set (make bench-ingest reads .local/cognis.env)")
        return 2
    subprocess.run([sys.executable, "-m", "app", "migrate"], cwd=ROOT, check=True)
    turns, questions = locomo_turns_and_questions(args.messages)
    embedding = get_settings().embedding
    print(
        f"== {len(turns)} LoCoMo turns; model {Path(embedding.embedding_model).name} "
        f"({embedding.embedding_backend}); queries {embedding.query_embedding_backend}; "
        f"{os.cpu_count()} cores",
        flush=True,
    )
    print(f"== beside: {describe_neighbours()}", flush=True)
    forward = embedding.embedding_forward_batch_size
    quiet = wait_for_quiet(args.quiet_timeout_s)
    print(f"== before raw: {quiet.describe()}", flush=True)
    args.raw = raw_throughput(turns, forward)
    print(f"raw model throughput: {args.raw:.1f} texts/s (sorted, passes of {forward})", flush=True)
    if {"messages", "batch", "chat", "submit"} & set(args.modes.split(",")):
        asyncio.run(deterministic(args, turns, questions))
    if "llm" in args.modes:
        asyncio.run(scripted_llm(args, turns))
    return 0


if __name__ == "__main__":
    sys.exit(main())
