"""Fault suite: kill -9 OpenSearch, the API and Postgres under bounded write load, then compare
Postgres with OpenSearch. Not a test (it takes minutes and prints numbers): `make bench-faults`.

Everything runs in a throwaway stack this suite starts itself in a temporary folder: its own
Postgres cluster and OpenSearch node (started by scripts/services.sh with their own ports and
COGNIS_LOCAL_DIR, from the binaries the shared services use) and its own API process. The shared
services are never touched.

Per scenario: writers POST memories (unique text each, no retries) for `--seconds`; the target
is killed with SIGKILL at a third of the run and started again at two thirds (the API at once:
its model load is the outage). Afterwards the outbox is drained and both stores are compared:

- acknowledged: writes answered 2xx; lost: acknowledged but not in Postgres;
- stored unacknowledged: in Postgres though the client saw no 2xx (in flight at the crash);
- duplicated: a text stored more than once; 5xx (500s separately) and connection errors;
- missing in / extra in OpenSearch: current memories without a document, documents without a
  current memory (after the relay drained the outbox).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from opensearchpy import AsyncOpenSearch
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from bench.ports import free_port
from bench.processes import read_env

ROOT = Path(__file__).resolve().parent.parent
API_KEY = "faults-" + uuid.uuid4().hex
INDEX = "cognis-faults"


class Stack:
    """A throwaway Postgres + OpenSearch + API under `base`."""

    def __init__(self, base: Path, opensearch_home: Path, model: str) -> None:
        self.base = base
        self.opensearch_home = opensearch_home
        self.model = model
        self.pg_port, self.os_port, self.os_transport = free_port(), free_port(), free_port()
        self.api_port = free_port()
        self.api: subprocess.Popen | None = None
        self.api_log = (base / "api.log").open("ab")

    def _script_env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("COGNIS_")}
        return env | {
            "COGNIS_LOCAL_DIR": str(self.base),
            "COGNIS_PG_PORT": str(self.pg_port),
            "COGNIS_OS_PORT": str(self.os_port),
            "COGNIS_OS_TRANSPORT_PORT": str(self.os_transport),
            "OPENSEARCH_JAVA_OPTS": "-Xms384m -Xmx384m",
        }

    def services(self, action: str, target: str) -> None:
        subprocess.run(  # noqa: S603 - the project's own script
            ["bash", str(ROOT / "scripts" / "services.sh"), action, target],  # noqa: S607
            env=self._script_env(),
            check=True,
            stdout=subprocess.DEVNULL,
        )

    def _prepare_opensearch(self) -> None:
        """A node of its own: the installed distribution, a copy of its config, new paths."""
        node = self.base / "opensearch"
        node.mkdir(parents=True)
        (node / "current").symlink_to(self.opensearch_home.resolve())
        shutil.copytree(self.opensearch_home.parent / "config", node / "config")
        for folder in ("data", "logs", "tmp"):
            (node / folder).mkdir()
        settings = {
            "cluster.name": "cognis-faults",
            "node.name": "cognis-faults-1",
            "network.host": "127.0.0.1",
            "http.port": self.os_port,
            "transport.port": self.os_transport,
            "discovery.type": "single-node",
            "path.data": node / "data",
            "path.logs": node / "logs",
        }
        (node / "config" / "opensearch.yml").write_text(
            "".join(f"{key}: {value}\n" for key, value in settings.items())
        )
        if os.getuid() == 0:  # OpenSearch runs as its own user (services.sh)
            user = pwd.getpwnam(os.environ.get("COGNIS_OS_USER", "opensearch"))
            for folder in ("config", "data", "logs", "tmp"):
                for path in [node / folder, *(node / folder).rglob("*")]:
                    os.chown(path, user.pw_uid, user.pw_gid)

    def start(self) -> None:
        self.base.chmod(0o755)
        self._prepare_opensearch()
        self.services("start", "postgres")
        self.restart("opensearch")
        env = self.api_env()
        subprocess.run(
            [sys.executable, "-m", "alembic", "upgrade", "head"], cwd=ROOT, env=env, check=True
        )
        self.start_api()

    def api_env(self) -> dict[str, str]:
        local = read_env(self.base / "cognis.env")
        env = {k: v for k, v in os.environ.items() if not k.startswith("COGNIS_")}
        return env | {
            "COGNIS_DATABASE_URL": local["COGNIS_DATABASE_URL"],
            "COGNIS_OPENSEARCH_URL": local["COGNIS_OPENSEARCH_URL"],
            "COGNIS_OPENSEARCH_INDEX": INDEX,
            "COGNIS_EMBEDDING_MODEL": self.model,
            "COGNIS_API_KEY_HASHES": hashlib.sha256(API_KEY.encode()).hexdigest(),
            "COGNIS_RELAY_POLL_INTERVAL_S": "0.5",
            "COGNIS_RELAY_BACKOFF_MAX_S": "5",
            "COGNIS_LOG_JSON": "true",
            "HF_HUB_OFFLINE": "1",
        }

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.api_port}"

    def start_api(self) -> None:
        self.api = subprocess.Popen(  # noqa: S603 - our own interpreter and module
            [sys.executable, "-m", "app", "serve", "--port", str(self.api_port)],
            cwd=ROOT,
            env=self.api_env(),
            stdout=self.api_log,
            stderr=subprocess.STDOUT,
        )

    async def wait_api(self, timeout: float = 300) -> None:  # noqa: ASYNC109
        deadline = time.monotonic() + timeout
        async with httpx.AsyncClient(timeout=3) as http:
            while time.monotonic() < deadline:
                try:
                    if (await http.get(f"{self.api_url}/ready")).status_code == 200:
                        return
                except httpx.HTTPError:
                    pass
                await asyncio.sleep(0.5)
        raise RuntimeError("the fault stack's API did not become ready")

    def kill(self, target: str) -> None:
        if target == "api":
            assert self.api is not None
            self.api.send_signal(signal.SIGKILL)
            self.api.wait()
            return
        if target == "postgres":
            pid_file = self.base / "postgres" / "data" / "postmaster.pid"
        else:
            pid_file = self.base / "run" / "opensearch.pid"
        os.kill(int(pid_file.read_text().split()[0]), signal.SIGKILL)

    def restart(self, target: str) -> None:
        if target == "api":
            self.start_api()
            return
        if target == "opensearch":
            # Not retried: services.sh gives up waiting for the pid file after 10 s, while a
            # JVM on a busy machine may still be starting; a second start would collide with it.
            try:
                self.services("start", target)
            except subprocess.CalledProcessError:
                self._wait_opensearch()
            return
        deadline = time.monotonic() + 60
        while True:  # a killed postmaster's backends take a moment to notice and exit
            try:
                self.services("start", target)
                return
            except subprocess.CalledProcessError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(2)

    def _wait_opensearch(self, timeout: float = 240) -> None:
        deadline = time.monotonic() + timeout
        url = f"http://127.0.0.1:{self.os_port}/_cluster/health?wait_for_status=yellow&timeout=5s"
        while time.monotonic() < deadline:
            try:
                if httpx.get(url, timeout=10).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(2)
        raise RuntimeError("the fault stack's OpenSearch did not come back")

    def stop(self) -> None:
        if self.api is not None and self.api.poll() is None:
            self.api.terminate()
            try:
                self.api.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.api.kill()
        self.api_log.close()
        subprocess.run(  # noqa: S603 - the project's own script
            ["bash", str(ROOT / "scripts" / "services.sh"), "stop", "all"],  # noqa: S607
            env=self._script_env(),
            check=False,
            stdout=subprocess.DEVNULL,
        )


@dataclass
class Outcome:
    writes: list[tuple[str, str, str | None]] = field(default_factory=list)  # text, status, id


async def _writer(stack: Stack, users: list[str], n: int, stop: asyncio.Event, out: Outcome):
    async with httpx.AsyncClient(headers={"X-API-Key": API_KEY}, timeout=30) as http:
        i = 0
        while not stop.is_set():
            i += 1
            content = f"Fault probe {n}-{i} {uuid.uuid4().hex[:10]}: I keep a garden journal"
            user = users[(n + i) % len(users)]
            try:
                response = await http.post(
                    f"{stack.api_url}/v1/users/{user}/memories",
                    json={"content": content, "category": "hobbies"},
                )
            except httpx.HTTPError as exc:
                out.writes.append((content, f"connection error: {type(exc).__name__}", None))
                await asyncio.sleep(0.2)
                continue
            memory_id = response.json().get("id") if response.status_code == 201 else None
            out.writes.append((content, str(response.status_code), memory_id))
            if response.status_code >= 500:
                await asyncio.sleep(0.2)


async def _drain(database_url: str, timeout: float) -> float | None:  # noqa: ASYNC109
    """Seconds until no outbox event is pending; None if some still were after `timeout`."""
    engine = create_async_engine(database_url)
    started = time.monotonic()
    try:
        while time.monotonic() - started < timeout:
            try:
                async with engine.connect() as connection:
                    pending = await connection.scalar(
                        text("SELECT count(*) FROM outbox WHERE processed_at IS NULL")
                    )
                if pending == 0:
                    return round(time.monotonic() - started, 1)
            except Exception as exc:  # Postgres still coming back
                print(f"  outbox not readable yet: {type(exc).__name__}", flush=True)
            await asyncio.sleep(1)
        return None
    finally:
        await engine.dispose()


async def _compare(stack: Stack, users: list[str], outcome: Outcome) -> dict[str, object]:
    env = stack.api_env()
    engine = create_async_engine(env["COGNIS_DATABASE_URL"])
    async with engine.connect() as connection:
        rows = (
            await connection.execute(
                text("SELECT id::text, content, is_current FROM memories WHERE user_id = ANY(:u)"),
                {"u": users},
            )
        ).all()
    await engine.dispose()
    search = AsyncOpenSearch(hosts=[env["COGNIS_OPENSEARCH_URL"]])
    await search.indices.refresh(index=INDEX)
    hits = await search.search(
        index=INDEX,
        body={
            "size": 10000,
            "_source": ["is_current"],
            "query": {"terms": {"user_id": users}},
        },
    )
    await search.close()
    documents = {h["_id"]: h["_source"].get("is_current") for h in hits["hits"]["hits"]}
    stored = {row.id for row in rows}
    current = {row.id for row in rows if row.is_current}
    by_text = Counter(row.content for row in rows)
    acknowledged = {text_: mid for text_, status, mid in outcome.writes if status == "201"}
    statuses = Counter(status for _, status, _ in outcome.writes)
    return {
        "writes": len(outcome.writes),
        "acknowledged": len(acknowledged),
        "lost": sum(1 for mid in acknowledged.values() if mid not in stored),
        "stored_unacknowledged": sum(1 for t in by_text if t not in acknowledged),
        "duplicated": sum(1 for count in by_text.values() if count > 1),
        "5xx": sum(n for s, n in statuses.items() if s.isdigit() and int(s) >= 500),
        "500": statuses.get("500", 0),
        "503": statuses.get("503", 0),
        "connection_errors": sum(n for s, n in statuses.items() if s.startswith("connection")),
        "pg_current": len(current),
        "os_documents": len(documents),
        "missing_in_opensearch": len(current - set(documents)),
        "extra_in_opensearch": len(set(documents) - current),
    }


async def scenario(stack: Stack, target: str, seconds: float, writers: int) -> dict[str, object]:
    users = [f"fault-{target}-{uuid.uuid4().hex[:6]}-{i}" for i in range(3)]
    outcome, stop = Outcome(), asyncio.Event()
    tasks = [asyncio.create_task(_writer(stack, users, n, stop, outcome)) for n in range(writers)]
    await asyncio.sleep(seconds / 3)
    await asyncio.to_thread(stack.kill, target)
    killed_at = len(outcome.writes)
    if target != "api":
        await asyncio.sleep(seconds / 3)
    await asyncio.to_thread(stack.restart, target)
    if target == "api":
        await stack.wait_api()
    await asyncio.sleep(seconds / 3)
    stop.set()
    await asyncio.gather(*tasks)
    await stack.wait_api()
    drained_s = await _drain(stack.api_env()["COGNIS_DATABASE_URL"], timeout=180)
    report = await _compare(stack, users, outcome)
    return {"killed": target, "writes_before_kill": killed_at, "drain_s": drained_s, **report}


COLUMNS = [
    "killed",
    "writes",
    "acknowledged",
    "lost",
    "stored_unacknowledged",
    "duplicated",
    "5xx",
    "500",
    "503",
    "connection_errors",
    "pg_current",
    "os_documents",
    "missing_in_opensearch",
    "extra_in_opensearch",
    "drain_s",
]


def markdown(results: list[dict[str, object]]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(str(r[c]) for c in COLUMNS) + " |" for r in results]
    return "\n".join(lines)


async def main_async(args: argparse.Namespace) -> int:
    base = Path(tempfile.mkdtemp(prefix="cognis-faults-"))
    stack = Stack(base, Path(args.opensearch_home), args.model)
    results = []
    try:
        print(f"starting a throwaway stack in {base}", flush=True)
        stack.start()
        await stack.wait_api()
        for target in args.kill:
            print(f"scenario: kill -9 {target} under {args.writers} writers", flush=True)
            result = await scenario(stack, target, args.seconds, args.writers)
            print(result, flush=True)
            results.append(result)
    finally:
        stack.stop()
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    print(markdown(results))
    return 0


def main() -> int:
    default_home = ROOT / ".local" / "opensearch" / "current"
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kill", nargs="+", default=["opensearch", "api", "postgres"])
    parser.add_argument("--seconds", type=float, default=45.0, help="write load per scenario")
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument(
        "--opensearch-home",
        default=os.environ.get("COGNIS_FAULTS_OPENSEARCH_HOME", str(default_home)),
        help="an installed OpenSearch (scripts/install-opensearch.sh), next to its config/",
    )
    parser.add_argument("--model", default=os.environ.get("COGNIS_EMBEDDING_MODEL", ""))
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args()
    if not args.model:
        parser.error("give --model or COGNIS_EMBEDDING_MODEL (the embedding model's folder)")
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    raise SystemExit(main())
