"""Small-user search latency, and where a request's time goes (issue 45, item 6).

Users of 10, 100 and 1,000 memories (pairs of LoCoMo turns from ../shared/data with their real
embeddings by the machine's model service, loaded by SQL as bench.scale loads its users) are
searched with LoCoMo's real questions, each asked once per configuration (never a cached
query embedding; a search that reports one under 1 ms found it cached, and is counted, not
timed). Per size: HTTP p50/p95 of POST /search, the server's own time and its stages (the
query embedding, BM25, the vector leg). Then the fixed per-request cost, part by part: GET
/health (router, middleware, serialisation: no key, no database), a wrong key on a user route
(+ the key guard, answered 401 before any SQL), an empty user's GET /memories?limit=1 (+ the
tenant bound, a session and one SQL round trip); and the query embedding as the API gets it:
this process's own request to the model service (a query, over a kept-alive connection) and
what the service says it queued.

`--compare URL` (repeatable) times other APIs (other configurations: another branch, the query
model in process) in the same run, each query sent to every one in turn, the order rotating,
and prints their ratios to the first: the machine is shared, so only ratios taken in one run
compare. `--model-alone` also times the int8 query model in this process on one core (the
floor of a query's embedding).
Needs the running service (`make up`, or an API started by hand); erases its users at the end.
Prints numbers; asserts nothing. Results: docs/benchmarks/search-latency.md.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import hashlib
import os
import random
import sys
import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from app.config import Settings
from app.ml.http_encoder import HttpEncoder, HttpEndpoint
from app.ml.scheduling.work import Work, WorkClass
from bench.database import default_tenant, owner_engine
from bench.foundation import percentile
from bench.locomo import load_conversations
from bench.scale import INSERT, vector_literal, wait_for_outbox

Timings = dict[str, list[float]]
# The stages worth a line of their own; the rest of the server's time is in server_ms.
STAGES = ("query_embedding_ms", "bm25_ms", "vector_256d_ms", "speakers_ms", "scan_choice_ms")


# Turns embedded for the memories (each memory joins two of them, as bench.scale's
# LocomoMemories does): 1,110 memories from 200 model calls' worth of text.
TURNS = 200


def locomo_turns() -> tuple[list[str], np.ndarray]:
    """The first TURNS LoCoMo turns and their vectors by the model service, cached under
    ~/.cache/cognis-memory/bench keyed by the model and the turns (kept chunk by chunk: a
    busy model service may take minutes, and an interrupted run resumes)."""
    settings = Settings()
    turns = [t["content"] for c in load_conversations(None) for t in c.turns][:TURNS]
    key = hashlib.sha256(
        settings.embedding.embedding_model.encode() + "\n".join(turns).encode()
    ).hexdigest()[:16]
    cache = Path.home() / ".cache" / "cognis-memory" / "bench" / f"latency-turns-{key}.npy"
    cache.parent.mkdir(parents=True, exist_ok=True)
    vectors = np.load(cache) if cache.exists() else np.zeros((0, 768), np.float32)
    if len(vectors) < len(turns):
        encoder = HttpEncoder(HttpEndpoint.from_settings(settings.embedding))
        try:
            while len(vectors) < len(turns):
                chunk = turns[len(vectors) : len(vectors) + 20]
                work = Work(WorkClass.INTERACTIVE, None, "bench")
                vectors = np.concatenate([vectors, encoder.encode_work(chunk, work)])
                np.save(cache, vectors.astype(np.float32))
                print(f"[load] embedded {len(vectors)}/{len(turns)} turns", flush=True)
        finally:
            encoder.close()
    return turns, vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def memories(
    turns: list[str], vectors: np.ndarray, count: int, rng: np.random.Generator
) -> tuple[list[str], np.ndarray]:
    """`count` memories, each two turns joined, its vector the normalised sum of theirs (the
    second weighted by U(0.3, 1)): the model's real spacing between statements."""
    pairs = rng.integers(0, len(turns), (count, 2))
    weights = rng.uniform(0.3, 1.0, (count, 1))
    joined = vectors[pairs[:, 0]] + weights * vectors[pairs[:, 1]]
    contents = [f"{turns[a]} {turns[b]}" for a, b in pairs]
    return contents, joined / np.linalg.norm(joined, axis=1, keepdims=True)


async def load_user(engine, user: str, turns: list[str], vectors: np.ndarray) -> None:
    """The user's memories and their outbox rows, as bench.scale writes them."""
    async with default_tenant(engine) as session:
        await session.execute(
            INSERT,
            {
                "ids": [uuid.uuid4() for _ in turns],
                "contents": turns,
                "speakers": [turn.partition(": ")[0] for turn in turns],
                "vectors": [vector_literal(v) for v in vectors],
                # A turn is a sentence or two: its own vector as its one sentence vector.
                "sentences": ['{"' + vector_literal(v) + '"}' for v in vectors],
                "user_id": user,
            },
        )


def questions(seed: int) -> list[str]:
    """LoCoMo's questions, shuffled anew each run (an API's query cache never saw them)."""
    asked = (q["question"] for c in load_conversations(None) for q in c.questions)
    texts = list(dict.fromkeys(asked))
    random.Random(seed).shuffle(texts)
    return texts


def timed(
    call: Callable[..., httpx.Response], *args: Any, **kwargs: Any
) -> tuple[float, httpx.Response]:
    started = time.perf_counter()
    response = call(*args, **kwargs)
    return (time.perf_counter() - started) * 1000, response


def search(api: httpx.Client, user: str, query: str, into: Timings) -> None:
    ms, response = timed(
        lambda: api.post(f"/v1/users/{user}/search", json={"query": query, "top_k": 10})
    )
    response.raise_for_status()
    body = response.json()
    stages = body["stage_durations_ms"]
    if stages.get("query_embedding_ms", 1.0) < 1.0:
        # Found cached (another question that is the same text without a speaker's name, or
        # one an earlier run asked of this API process): counted, not timed.
        into["cached_embeddings"].append(1.0)
        return
    into["http_ms"].append(ms)
    into["server_ms"].append(body["duration_ms"])
    into["outside_server_ms"].append(ms - body["duration_ms"])
    for stage in STAGES:
        if stage in stages:
            into[stage].append(stages[stage])


def fixed_costs(apis: list[httpx.Client], empty_user: str, n: int, into: list[Timings]) -> None:
    """The per-request cost without a search, part by part (module docstring), each
    configuration in turn."""
    path = f"/v1/users/{empty_user}/memories"
    wrong_key = {"X-API-Key": "not-a-key"}
    for _ in range(n):
        for api, timings in zip(apis, into, strict=True):
            timings["health_ms"].append(timed(api.get, "/health")[0])
            ms, response = timed(api.get, path, params={"limit": 1}, headers=wrong_key)
            assert response.status_code == 401, response.text
            timings["wrong_key_401_ms"].append(ms)
            ms, response = timed(api.get, path, params={"limit": 1})
            response.raise_for_status()
            timings["empty_user_get_ms"].append(ms)


def model_service(queries: list[str], into: Timings, url: str | None) -> None:
    """A query's embedding from this process, as the API asks for it (class query)."""
    endpoint = HttpEndpoint.from_settings(Settings().embedding)
    encoder = HttpEncoder(dataclasses.replace(endpoint, url=url) if url else endpoint)
    try:
        for query in queries:
            started = time.perf_counter()
            response = encoder._post(
                {"model": encoder.endpoint.model, "input": [query]},
                {"X-Cognis-Work-Class": "query"},
            )
            into["model_service_http_ms"].append((time.perf_counter() - started) * 1000)
            into["model_service_queued_ms"].append(response.json()["cognis"]["queued_ms"])
    finally:
        encoder.close()


def model_alone(queries: list[str], into: Timings) -> None:
    """The int8 query model in this process on one core: a query embedding's floor."""
    from app.ml.embedder import build_embedder

    embedding = Settings().embedding
    embedder = build_embedder(embedding, "onnx-int8", embedding.query_embedding_intra_op_threads)
    embedder.load()
    embedder.embed_sync(["warm up"])
    for query in queries:
        started = time.perf_counter()
        embedder.embed_sync([query])
        into["model_alone_ms"].append((time.perf_counter() - started) * 1000)


def line(name: str, values: list[float]) -> str:
    return (
        f"    {name:24s} p50 {percentile(values, 50):7.1f}  p95 {percentile(values, 95):7.1f}"
        f"  (n={len(values)})"
    )


def show(labels: list[str], results: list[Timings], title: str) -> None:
    print(f"== {title}")
    for label, timings in zip(labels, results, strict=True):
        print(f"  {label}:")
        for name, values in timings.items():
            if name == "cached_embeddings":
                print(f"    {len(values)} searches found their query embedding cached (not timed)")
            elif values:
                print(line(name, values))
    for label, timings in zip(labels[1:], results[1:], strict=True):
        base = results[0]
        for name in ("http_ms", "query_embedding_ms", "empty_user_get_ms"):
            if base.get(name) and timings.get(name):
                ratios = [
                    percentile(timings[name], q) / percentile(base[name], q) for q in (50, 95)
                ]
                print(f"  {label} / {labels[0]} {name}: p50 x{ratios[0]:.2f}, p95 x{ratios[1]:.2f}")


async def main_async(args: argparse.Namespace) -> int:
    sizes = [int(s) for s in args.sizes.split(",")]
    bases = [args.api, *(args.compare or [])]
    labels = args.labels.split(",") if args.labels else bases
    if len(labels) != len(bases):
        raise SystemExit(f"--labels names {len(labels)} configurations, not {len(bases)}")
    apis = [
        httpx.Client(base_url=base, headers={"X-API-Key": args.key}, timeout=60) for base in bases
    ]
    run = uuid.uuid4().hex[:6]
    users = {size: f"latency-{run}-{size}" for size in sizes}
    empty_user = f"latency-{run}-empty"
    turns, vectors = locomo_turns()
    rng = np.random.default_rng(int(run, 16))
    engine = owner_engine(Settings())
    queries = iter(questions(int(run, 16)))
    print(f"load average {os.getloadavg()[0]:.2f} at the start", flush=True)
    try:
        for size in sizes:
            await load_user(engine, users[size], *memories(turns, vectors, size, rng))
        print(f"[load] users of {args.sizes} memories; waiting for the relay ...", flush=True)
        wait_for_outbox(apis[0])
        for api in apis:  # warm: connections, plans, the query model's first call
            for size in sizes:
                search(api, users[size], next(queries), defaultdict(list))
        for size in sizes:
            results: list[Timings] = [defaultdict(list) for _ in apis]
            for n in range(args.queries):
                query = next(queries)
                for k in range(len(apis)):  # who goes first rotates
                    i = (n + k) % len(apis)
                    search(apis[i], users[size], query, results[i])
            show(labels, results, f"search, a user of {size} memories, fresh queries")
        results = [defaultdict(list) for _ in apis]
        fixed_costs(apis, empty_user, args.queries, results)
        show(labels, results, "the fixed per-request cost (no search)")
        embedding: Timings = defaultdict(list)
        model_service([next(queries) for _ in range(args.queries)], embedding, args.model_service)
        if args.model_alone:
            model_alone([next(queries) for _ in range(args.queries)], embedding)
        show(["this process"], [embedding], "a query's embedding")
        print(f"load average {os.getloadavg()[0]:.2f} at the end")
    finally:
        for user in users.values():
            apis[0].delete(f"/v1/users/{user}").raise_for_status()
        await engine.dispose()
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    port = os.environ.get("COGNIS_API_PORT", "8000")  # make up's (scripts/lib.sh)
    parser.add_argument("--api", default=os.environ.get("COGNIS_API", f"http://127.0.0.1:{port}"))
    parser.add_argument(
        "--compare",
        metavar="URL",
        action="append",
        help="another API (another configuration), timed alongside; may be repeated",
    )
    parser.add_argument("--labels", help="names of the configurations, e.g. before,after")
    parser.add_argument("--key", default=os.environ.get("COGNIS_API_KEY", "cognis-dev-key"))
    parser.add_argument("--sizes", default="10,100,1000", help="memories of each queried user")
    parser.add_argument("--queries", type=int, default=60, help="fresh queries per size")
    parser.add_argument(
        "--model-service",
        metavar="URL",
        help="the model service to time a query's embedding against (default: "
        "COGNIS_EMBEDDING_HTTP_URL, make up's)",
    )
    parser.add_argument(
        "--model-alone",
        action="store_true",
        help="also time the int8 query model in this process (loads it: ~0.3 GB)",
    )
    return asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
