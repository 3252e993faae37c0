"""Test session: real Postgres + pgvector, real OpenSearch, the real HTTP API in a subprocess."""

from __future__ import annotations

import asyncio
import hashlib
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
from opensearchpy import AsyncOpenSearch
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from app.db.engine import SERVER_SETTINGS
from tests import services

ROOT = services.ROOT
API_KEY = "test-key-" + uuid.uuid4().hex
LOG_DIR = services.LOCAL_DIR / "logs"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def service_urls() -> Iterator[services.ServiceUrls]:
    stack: list = []
    try:
        yield services.acquire(stack)
    finally:
        for container in reversed(stack):
            container.stop()


@pytest.fixture(scope="session")
def index_name() -> str:
    return f"cognis-test-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="session")
def base_env(service_urls: services.ServiceUrls, index_name: str) -> dict[str, str]:
    """Environment of every service process the tests start."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("COGNIS_")}
    env.update(
        {
            "COGNIS_DATABASE_URL": service_urls.database_url,
            "COGNIS_OPENSEARCH_URL": service_urls.opensearch_url,
            "COGNIS_OPENSEARCH_INDEX": index_name,
            "COGNIS_EMBEDDING_MODEL": services.embedding_model(),
            "COGNIS_API_KEY_HASHES": hashlib.sha256(API_KEY.encode()).hexdigest(),
            "COGNIS_RELAY_POLL_INTERVAL_S": "0.5",
            "COGNIS_LOG_JSON": "true",
            "HF_HUB_OFFLINE": "1",
        }
    )
    return env


def run_cli(env: dict[str, str], *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def alembic(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    result = run_cli(env, "alembic", *args)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


@pytest.fixture(scope="session")
def migrated(base_env: dict[str, str]) -> dict[str, str]:
    """A fresh schema: downgrade whatever a previous run left, then upgrade to head."""
    alembic(base_env, "downgrade", "base")
    alembic(base_env, "upgrade", "head")
    return base_env


class ApiProcess:
    running: list[ApiProcess] = []  # every API subprocess of this session, for outage tests

    def __init__(self, env: dict[str, str], name: str) -> None:
        self.env = env
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        LOG_DIR.mkdir(parents=True, exist_ok=True)
        self.log_path = LOG_DIR / f"test-{name}.log"
        self._log = self.log_path.open("w")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "app", "serve", "--port", str(self.port)],
            cwd=ROOT,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        ApiProcess.running.append(self)

    def wait_ready(self, timeout: float = 180) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                break
            try:
                if httpx.get(f"{self.url}/ready", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"API did not become ready; log:\n{self.log_path.read_text()[-4000:]}")

    def stop(self) -> None:
        if self in ApiProcess.running:
            ApiProcess.running.remove(self)
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
        self._log.close()

    def log_text(self) -> str:
        self._log.flush()
        return self.log_path.read_text()


@pytest.fixture(scope="session")
def api(migrated: dict[str, str]) -> Iterator[ApiProcess]:
    process = ApiProcess(migrated, "api")
    process.wait_ready()
    yield process
    process.stop()


@pytest.fixture(scope="session")
def dead_opensearch_env(migrated: dict[str, str]) -> dict[str, str]:
    """Same database, but OpenSearch at a port where nothing listens: an outage."""
    return {**migrated, "COGNIS_OPENSEARCH_URL": f"http://127.0.0.1:{_free_port()}"}


@pytest.fixture(scope="session")
def api_without_opensearch(dead_opensearch_env: dict[str, str]) -> Iterator[ApiProcess]:
    env = {**dead_opensearch_env, "COGNIS_RELAY_IN_API": "false"}
    process = ApiProcess(env, "api-no-opensearch")
    process.wait_ready()
    yield process
    process.stop()


@pytest.fixture
async def client(api: ApiProcess) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(
        base_url=api.url, headers={"X-API-Key": API_KEY}, timeout=60
    ) as http:
        yield http


@pytest.fixture(scope="session")
async def db(migrated: dict[str, str]) -> AsyncIterator[AsyncEngine]:
    engine = create_async_engine(
        migrated["COGNIS_DATABASE_URL"], connect_args={"server_settings": SERVER_SETTINGS}
    )
    yield engine
    await engine.dispose()


@pytest.fixture(scope="session")
async def opensearch(
    service_urls: services.ServiceUrls, index_name: str
) -> AsyncIterator[AsyncOpenSearch]:
    client = AsyncOpenSearch(hosts=[service_urls.opensearch_url])
    yield client
    await client.indices.delete(index=index_name, ignore_unavailable=True)
    await client.close()


@pytest.fixture
def user_id() -> str:
    return f"u-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def other_user_id() -> str:
    return f"v-{uuid.uuid4().hex[:12]}"


async def wait_until(predicate, timeout: float = 30.0, interval: float = 0.25):  # noqa: ASYNC109
    """Poll an async predicate until it returns something truthy; fail with a clear message."""
    deadline = time.monotonic() + timeout
    while True:
        value = await predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s: {predicate.__name__}")
        await asyncio.sleep(interval)
