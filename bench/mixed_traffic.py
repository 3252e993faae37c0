"""Mixed traffic: one tenant imports a history while two others write, chat and search.

Phases, one run, one API process of the bench's own (its own job queue):
1. idle: tenants B and C each send single memories (POST /memories) and messages (POST
   /messages) at a steady interactive rate, and search, with nothing else running;
2. alone: tenant A imports `--bulk-texts` texts of real chat length (LoCoMo turns joined in
   runs of `--turns-per-text`, a few hundred tokens) without vectors, through
   POST /memories/batch (100 a request) or POST /import (NDJSON), with nobody else;
3. mixed: A's import again (fresh user), while B and C repeat phase 1's load.

It prints, for each bulk path: the interactive single-write latency (p50/p95), message
time-to-searchable (202 -> its memory returned by OpenSearch for its token), search latency,
and A's texts/s, with the ratios the issue sets (mixed p95 / idle p95, mixed bulk / alone).
Tenants A, B and C are created through the admin API; every bench user is erased at the end
(the tenants stay, empty). Prints numbers; asserts nothing. Not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import os
import secrets
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from bench import as_client
from bench.foundation import LOCOMO, locomo_turns_and_questions, percentile
from bench.ingestion import _start_api
from bench.processes import describe_neighbours, resident_memory

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Interactive:
    """What tenants B and C saw during one phase."""

    write_ms: list[float] = field(default_factory=list)
    to_searchable_ms: list[float] = field(default_factory=list)
    search_ms: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    unsearchable: int = 0


def chat_texts(count: int, turns_per_text: int) -> list[str]:
    """LoCoMo turns joined in runs of consecutive turns of one session: chat-length texts."""
    data = json.loads(LOCOMO.read_text())
    texts: list[str] = []
    while len(texts) < count:
        for sample in data:
            conversation = sample["conversation"]
            for key in sorted(k for k in conversation if k.startswith("session_")):
                if "date" in key:
                    continue
                turns = [f"{t['speaker']}: {t['text']}" for t in conversation[key]]
                for start in range(0, len(turns), turns_per_text):
                    texts.append(" ".join(turns[start : start + turns_per_text]))
                    if len(texts) >= count:
                        return texts
    return texts


def _summary(values: list[float]) -> str:
    if not values:
        return "n=0"
    return (
        f"n={len(values)} p50={percentile(values, 50):.0f} ms p95={percentile(values, 95):.0f} ms"
    )


def _p95(values: list[float]) -> float:
    return percentile(values, 95) if values else float("nan")


async def create_tenant(admin: httpx.AsyncClient, name: str) -> tuple[str, str]:
    """A new tenant through the admin API: its id and an API key of its own."""
    tenant = await admin.post("/admin/v1/tenants", json={"name": name})
    tenant.raise_for_status()
    tenant_id = str(tenant.json()["id"])
    key = await admin.post(f"/admin/v1/tenants/{tenant_id}/keys", json={"name": "bench"})
    key.raise_for_status()
    return tenant_id, str(key.json()["key"])


async def _tenant_key(admin: httpx.AsyncClient, name: str) -> str:
    return (await create_tenant(admin, name))[1]


async def _searchable(
    opensearch: httpx.AsyncClient, index: str, user_id: str, token: str, timeout_s: float
) -> float | None:
    """Seconds (perf_counter) when OpenSearch first returns the user's memory with `token`."""
    query = {
        "size": 1,
        "query": {
            "bool": {
                "must": [{"match": {"content": token}}],
                "filter": [{"term": {"user_id": user_id}}, {"term": {"is_current": True}}],
            }
        },
    }
    deadline = time.perf_counter() + timeout_s
    while time.perf_counter() < deadline:
        hits = (await opensearch.post(f"/{index}/_search", json=query)).json()
        if hits.get("hits", {}).get("hits"):
            return time.perf_counter()
        await asyncio.sleep(0.05)
    return None


async def _interactive(
    url: str,
    key: str,
    user_id: str,
    args: argparse.Namespace,
    texts: list[str],
    questions: list[str],
    stop: asyncio.Event,
    seen: Interactive,
) -> None:
    """One tenant's steady load until `stop`: a single memory every 1/rate s, a message every
    2/rate s (time-to-searchable followed), a search every 1/rate s."""
    headers = {"X-API-Key": key}
    watchers: list[asyncio.Task] = []
    async with (
        httpx.AsyncClient(base_url=url, headers=headers, timeout=args.client_timeout_s) as http,
        httpx.AsyncClient(base_url=args.opensearch, timeout=10) as opensearch,
    ):

        async def timed(method: str, path: str, body: dict) -> httpx.Response | None:
            started = time.perf_counter()
            try:
                response = await http.request(method, path, json=body)
            except httpx.HTTPError as exc:
                seen.errors.append(f"{path}: {type(exc).__name__}")
                return None
            if response.status_code >= 400:
                seen.errors.append(f"{path}: {response.status_code}")
                return None
            elapsed = (time.perf_counter() - started) * 1000
            if path.endswith("/search"):
                seen.search_ms.append(elapsed)
            elif path.endswith("/memories"):
                seen.write_ms.append(elapsed)
            return response

        async def follow(token: str, accepted_at: float) -> None:
            at = await _searchable(opensearch, args.index, user_id, token, args.searchable_s)
            if at is None:
                seen.unsearchable += 1
            else:
                seen.to_searchable_ms.append((at - accepted_at) * 1000)

        tick, n = 1 / args.interactive_rate, 0
        started = time.perf_counter()
        while not stop.is_set():
            text = texts[n % len(texts)]
            await timed("POST", f"/v1/users/{user_id}/memories", {"content": f"{text} #{n}"})
            if n % 2 == 0:
                token = f"zq{uuid.uuid4().hex[:10]}"
                # Not the text just written as a memory: without an LLM, a message that says
                # what a memory already says is decided NONE (known) and never becomes one.
                said = texts[-(n + 1) % len(texts)]
                body = {"messages": [{"content": f"{said} (ref {token})"}]}
                response = await timed("POST", f"/v1/users/{user_id}/messages", body)
                if response is not None:
                    watchers.append(asyncio.create_task(follow(token, time.perf_counter())))
            question = questions[n % len(questions)]
            await timed("POST", f"/v1/users/{user_id}/search", {"query": question, "top_k": 10})
            n += 1
            delay = started + n * tick - time.perf_counter()
            if delay > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), delay)
        await asyncio.gather(*watchers)


async def _bulk(
    url: str, key: str, user_id: str, texts: list[str], path: str, batch_size: int
) -> float:
    """A's import: texts/s through POST /memories/batch (`batch_size` a request, 2 clients) or
    one streamed POST /import."""
    headers = {"X-API-Key": key}
    started = time.perf_counter()
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=3600) as http:
        if path == "import":
            lines = "".join(
                json.dumps({"content": t, "category": "hobbies", "external_id": f"x{i}"}) + "\n"
                for i, t in enumerate(texts)
            )
            response = await http.post(
                f"/v1/users/{user_id}/import",
                content=lines.encode(),
                headers={"Content-Type": "application/x-ndjson"},
            )
            response.raise_for_status()
        else:
            chunks = [texts[i : i + batch_size] for i in range(0, len(texts), batch_size)]

            async def client() -> None:
                # A refused batch (503 past its deadline, nothing written) is sent again after
                # Retry-After and one refused for size (413) in parts, as a client would.
                while chunks:
                    chunk = chunks.pop(0)
                    memories = [{"content": t, "category": "hobbies"} for t in chunk]
                    await as_client.post_batch(http, user_id, memories)

            await asyncio.gather(client(), client())
    return len(texts) / (time.perf_counter() - started)


async def _phase(
    url: str,
    keys: dict[str, str],
    args: argparse.Namespace,
    texts: list[str],
    questions: list[str],
    bulk: tuple[str, str] | None,
    users: list[tuple[str, str]],
) -> tuple[Interactive, float | None]:
    """Interactive load of B and C while A's bulk runs (or for --idle-s without it)."""
    seen, stop = Interactive(), asyncio.Event()
    tag = uuid.uuid4().hex[:6]
    users += [(t, f"bench-{t}-{tag}") for t in ("b", "c")]
    loads = [
        asyncio.create_task(
            _interactive(url, keys[t], f"bench-{t}-{tag}", args, texts, questions, stop, seen)
        )
        for t in ("b", "c")
    ]
    rate = None
    if bulk is None:
        await asyncio.sleep(args.idle_s)
    else:
        user_id, path = bulk
        rate = await _bulk(url, keys["a"], user_id, texts[: args.bulk_texts], path, args.batch_size)
    stop.set()
    await asyncio.gather(*loads)
    return seen, rate


def _report(name: str, seen: Interactive, idle: Interactive) -> None:
    print(f"  {name}:")
    print(
        f"    single write {_summary(seen.write_ms)}"
        f" (p95 {_p95(seen.write_ms) / _p95(idle.write_ms):.2f}x idle)"
    )
    print(f"    message to searchable {_summary(seen.to_searchable_ms)}", end="")
    print(f", not searchable in time: {seen.unsearchable}" if seen.unsearchable else "")
    print(
        f"    search {_summary(seen.search_ms)}"
        f" (p95 {_p95(seen.search_ms) / _p95(idle.search_ms):.2f}x idle)"
    )
    if seen.errors:
        print(f"    errors: {len(seen.errors)} (first: {seen.errors[:3]})")


def start_admin_api(log_name: str) -> tuple[subprocess.Popen, str, str]:
    """An API process of the bench's own: tenants only through its admin key (no plain API
    key), its own ingestion queue, no LLM (each message is stored as it is). Returns the
    process, its URL and the admin key."""
    admin_key = secrets.token_urlsafe(24)
    env = dict(os.environ)
    env.update(
        {
            "COGNIS_API_KEY_HASHES": "",
            "COGNIS_ADMIN_KEY_HASHES": hashlib.sha256(admin_key.encode()).hexdigest(),
            "COGNIS_INGEST_QUEUE": f"bench-{uuid.uuid4().hex[:8]}",
            "COGNIS_LOG_LEVEL": "WARNING",
            "COGNIS_LOG_JSON": "true",
        }
    )
    env.pop("COGNIS_LLM_BASE_URL", None)
    log_path = ROOT / ".local" / "logs" / log_name
    log_path.parent.mkdir(parents=True, exist_ok=True)
    process, url = _start_api(env, log_path)
    return process, url, admin_key


async def run(args: argparse.Namespace) -> None:
    process, url, admin_key = start_admin_api("bench-mixed-traffic.log")
    texts = chat_texts(args.bulk_texts, args.turns_per_text)
    _, questions = locomo_turns_and_questions(1000)
    tag = uuid.uuid4().hex[:6]
    users: list[tuple[str, str]] = []  # (tenant, user): erased at the end
    keys: dict[str, str] = {}
    try:
        async with httpx.AsyncClient(
            base_url=url, headers={"X-API-Key": admin_key}, timeout=60
        ) as admin:
            keys = {t: await _tenant_key(admin, f"bench-{t}-{tag}") for t in ("a", "b", "c")}
        words = sum(len(t.split()) for t in texts) / len(texts)
        print(
            f"bulk texts: {len(texts)}, {words:.0f} words each on average; interactive: "
            f"{args.interactive_rate}/s single writes, {args.interactive_rate / 2}/s messages, "
            f"{args.interactive_rate}/s searches, per tenant (B, C)",
            flush=True,
        )
        print(f"beside: {describe_neighbours()}", flush=True)
        idle, _ = await _phase(url, keys, args, texts, questions, None, users)
        print("idle (B and C only):", flush=True)
        _report("interactive", idle, idle)
        for path in args.paths:
            alone_user, mixed_user = f"bench-a-{path}-{tag}", f"bench-a-{path}-mixed-{tag}"
            users += [("a", alone_user), ("a", mixed_user)]
            alone = await _bulk(
                url, keys["a"], alone_user, texts[: args.bulk_texts], path, args.batch_size
            )
            mixed, rate = await _phase(url, keys, args, texts, questions, (mixed_user, path), users)
            assert rate is not None
            print(
                f"bulk through {path}: alone {alone:.1f} texts/s, mixed {rate:.1f} texts/s "
                f"({rate / alone:.2f} of alone)"
            )
            _report("interactive while A imports", mixed, idle)
        print(f"clients: {as_client.RETRIES.describe()}", flush=True)
        print(f"resident memory: {resident_memory({'bench API': process.pid})}", flush=True)
    finally:
        async with httpx.AsyncClient(base_url=url, timeout=600) as http:
            for tenant, user in users:
                await http.delete(f"/v1/users/{user}", headers={"X-API-Key": keys[tenant]})
        process.terminate()
        process.wait(timeout=60)


def main() -> int:
    # Each figure as soon as it is known, also into a file (a run takes many minutes).
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[attr-defined]
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bulk-texts", type=int, default=5000)
    parser.add_argument("--turns-per-text", type=int, default=8)
    parser.add_argument(
        "--batch-size",
        type=int,
        default=100,
        help="texts per POST /memories/batch (a batch the server refuses for its size, 413, is "
        "sent in the parts it says fit)",
    )
    parser.add_argument("--paths", nargs="+", default=["batch", "import"])
    parser.add_argument("--interactive-rate", type=float, default=0.5, help="per tenant, per s")
    parser.add_argument("--idle-s", type=float, default=60)
    parser.add_argument("--searchable-s", type=float, default=120)
    parser.add_argument("--client-timeout-s", type=float, default=120)
    parser.add_argument(
        "--opensearch", default=os.environ.get("COGNIS_OPENSEARCH_URL", "http://127.0.0.1:59200")
    )
    parser.add_argument(
        "--index", default=os.environ.get("COGNIS_OPENSEARCH_INDEX", "cognis-memories")
    )
    asyncio.run(run(parser.parse_args()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
