"""The model service killed (-9) under a small load of searches and writes, as `make up` runs
it: supervised by scripts/embedder.sh, with a key, and an API process embedding through it.

While it is down: searches answer from BM25 alone and say the vector leg is missing (a query
whose vector is cached still uses it), writes get 503 with Retry-After, /ready is not ready and
says why. Its supervisor starts it again; then /ready is ready and writes succeed. No request
gets a 500 and no acknowledged write is lost. The time to recover is printed, not asserted:
it is mostly the model's load time on this machine.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from bench.ports import free_port
from tests import services
from tests.conftest import API_KEY, ApiProcess, wait_until

KEY = "test-outage-key"
SCRIPT = services.ROOT / "scripts" / "embedder.sh"
SEEDED = "Caroline keeps three beehives on the roof of her flat in Porto."


@dataclass(frozen=True)
class Supervised:
    url: str
    env: dict[str, str]
    run_dir: Path

    def service_pid(self) -> int:
        return int((self.run_dir / "embedder.pid").read_text())


@pytest.fixture(scope="module")
def model() -> str:
    minilm = services.CACHE_DIR / "models" / "all-MiniLM-L6-v2"
    if not (minilm / "modules.json").exists():
        pytest.skip(f"no all-MiniLM-L6-v2 at {minilm}")
    return str(minilm)


@pytest.fixture(scope="module")
def supervised(model: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Supervised]:
    """scripts/embedder.sh's supervisor and model service, in a local dir of this test's own."""
    local = tmp_path_factory.mktemp("local")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("COGNIS_")}
    env |= {
        "COGNIS_LOCAL_DIR": str(local),
        "COGNIS_EMBED_PORT": str(port),
        "COGNIS_EMBEDDING_MODEL": model,
        "COGNIS_QUERY_EMBEDDING_BACKEND": "same",  # one model load: the quickest restart
        "COGNIS_EMBEDDING_HTTP_API_KEY": KEY,
    }
    started = subprocess.run(
        ["bash", str(SCRIPT), "start"], env=env, capture_output=True, text=True, timeout=400
    )
    try:
        assert started.returncode == 0, started.stderr
        yield Supervised(f"http://127.0.0.1:{port}", env, local / "run")
    finally:
        subprocess.run(["bash", str(SCRIPT), "stop"], env=env, timeout=120)


@pytest.fixture(scope="module")
def api_on_it(migrated: dict[str, str], supervised: Supervised, model: str) -> Iterator[ApiProcess]:
    env = {
        **migrated,
        "COGNIS_EMBEDDING_MODEL": model,
        "COGNIS_EMBEDDING_HTTP_URL": f"{supervised.url}/v1",
        "COGNIS_EMBEDDING_HTTP_API_KEY": KEY,
        "COGNIS_EMBEDDING_HTTP_TIMEOUT_S": "30",
        "COGNIS_EMBEDDING_HTTP_MAX_RETRIES": "1",
        "COGNIS_EMBEDDING_HTTP_BACKOFF_BASE_S": "0.05",
        "COGNIS_INGEST_WORKER_IN_API": "false",
    }
    process = ApiProcess(env, "api-model-outage")
    process.wait_ready()
    yield process
    process.stop()


@dataclass
class Answer:
    at: float
    kind: str  # search, cached_search, write
    status: int
    body: dict[str, Any]
    retry_after: str | None


async def test_kill_9_under_load(
    api_on_it: ApiProcess, supervised: Supervised, user_id: str
) -> None:
    answers: list[Answer] = []
    readiness: list[tuple[float, int, dict[str, Any]]] = []
    stop = asyncio.Event()
    # Connections kept idle for less than the server's keep-alive (uvicorn: 5 s), so a request
    # never goes out on one the server is closing (an httpx ReadError, not the service's).
    async with httpx.AsyncClient(
        base_url=api_on_it.url,
        headers={"X-API-Key": API_KEY},
        timeout=60,
        limits=httpx.Limits(keepalive_expiry=1),
    ) as http:
        seeded = await http.post(
            f"/v1/users/{user_id}/memories", json={"content": SEEDED, "category": "hobbies"}
        )
        assert seeded.status_code == 201, seeded.text
        cached_query = {"query": "who keeps beehives?", "consistency": "indexed"}
        warm = await http.post(f"/v1/users/{user_id}/search", json=cached_query)
        assert warm.status_code == 200 and warm.json()["missing_legs"] == [], warm.text

        async def record(kind: str, request: Any) -> None:
            response = await request
            # A refusal of the request itself would only make the wait below time out.
            assert not 400 <= response.status_code < 500, response.text
            body = response.json() if response.content else {}
            answers.append(
                Answer(
                    time.monotonic(),
                    kind,
                    response.status_code,
                    body,
                    response.headers.get("retry-after"),
                )
            )

        async def searcher() -> None:
            while not stop.is_set():
                query = {"query": f"beehives on the roof {uuid.uuid4().hex[:6]}"}
                await record("search", http.post(f"/v1/users/{user_id}/search", json=query))
                await record(
                    "cached_search", http.post(f"/v1/users/{user_id}/search", json=cached_query)
                )
                await asyncio.sleep(0.1)

        async def writer() -> None:
            i = 0
            while not stop.is_set():
                i += 1
                body = {"content": f"Caroline's note number {i}.", "category": "hobbies"}
                await record("write", http.post(f"/v1/users/{user_id}/memories", json=body))
                await asyncio.sleep(0.2)

        async def watcher() -> None:
            while not stop.is_set():
                ready = await http.get("/ready")
                readiness.append((time.monotonic(), ready.status_code, ready.json()))
                await asyncio.sleep(0.25)

        load = [asyncio.create_task(f()) for f in (searcher, searcher, writer, watcher)]
        await asyncio.sleep(2)  # load before the kill
        killed_pid = supervised.service_pid()
        killed_at = time.monotonic()
        os.kill(killed_pid, 9)

        async def ready_again() -> bool:
            for task in load:
                if task.done():
                    task.result()  # a load task that failed says why, now
            return any(at > killed_at and b["model"] == "up" for at, _, b in readiness) and any(
                a.at > killed_at and a.kind == "write" and a.status == 201 for a in answers
            )

        await wait_until(ready_again, timeout=300, interval=0.25)
        await asyncio.sleep(1)  # load after the recovery
        stop.set()
        await asyncio.gather(*load)
        listed = await http.get(f"/v1/users/{user_id}/memories", params={"limit": 200})

    restarted_pid = supervised.service_pid()
    after = [a for a in answers if a.at > killed_at]
    # Degraded, not down, while the model is away: 200 (a load balancer keeps the instance),
    # the body saying that searches answer from BM25 alone.
    first_not_ready = min(at for at, _, b in readiness if at > killed_at and b["model"] != "up")
    ready_at = min(at for at, _, b in readiness if at > first_not_ready and b["model"] == "up")
    down = [a for a in after if a.at < ready_at]
    written_at = min(a.at for a in after if a.kind == "write" and a.status == 201)
    print(
        f"\nmodel service kill -9: /ready not ready after {first_not_ready - killed_at:.2f} s, "
        f"ready again after {ready_at - killed_at:.1f} s, first write after "
        f"{written_at - killed_at:.1f} s; {len(answers)} requests "
        f"({sum(a.kind == 'write' for a in answers)} writes), "
        f"{sum(a.status == 503 for a in answers)} answered 503"
    )

    assert restarted_pid != killed_pid, "the supervisor started a new model service"
    assert [a for a in answers if a.status >= 500 and a.status != 503] == []
    not_ready = [body for at, status, body in readiness if first_not_ready <= at < ready_at]
    assert not_ready and all(b["model"].startswith("unreachable") for b in not_ready), not_ready
    assert all(b["status"] == "degraded" and b["search"] == "bm25-only" for b in not_ready)
    assert {status for _, status, _ in readiness} == {200}
    assert readiness[-1][1] == 200 and readiness[-1][2]["model"] == "up"
    # While down: searches from BM25 alone, saying so; the seeded memory still found.
    bm25_only = [a for a in down if a.kind == "search" and a.body.get("missing_legs")]
    assert bm25_only, "no search ran while the model service was down"
    for a in bm25_only:
        assert a.status == 200 and a.body["missing_legs"] == ["vector"]
        assert a.body["stages"]["vector"].startswith("unavailable")
        assert SEEDED in [hit["memory"]["content"] for hit in a.body["results"]]
    # A cached query vector is still used: both legs, the whole time.
    cached = [a for a in after if a.kind == "cached_search"]
    assert cached and all(a.status == 200 and a.body["missing_legs"] == [] for a in cached)
    # Writes while down: 503 with Retry-After; none acknowledged is lost.
    refused = [a for a in down if a.kind == "write" and a.status == 503]
    assert refused and all(a.retry_after and int(a.retry_after) > 0 for a in refused)
    acknowledged = {a.body["id"] for a in answers if a.kind == "write" and a.status == 201}
    assert listed.json()["next_cursor"] is None
    stored = {m["id"] for m in listed.json()["items"]}
    assert acknowledged <= stored, acknowledged - stored
    # After the restart, both legs again.
    last_search = next(a for a in reversed(answers) if a.kind == "search")
    assert last_search.status == 200 and last_search.body["missing_legs"] == []
