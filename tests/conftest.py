"""Test session: real Postgres + pgvector, real OpenSearch, the real API.

Most tests reach the API in this process (the Litestar app behind httpx's ASGI transport, its
lifespan entered once): no socket, one model load. Tests about processes (outages, logs, the
CLI, a second configuration) start the API as a subprocess (`ApiProcess`). The outbox relay
always runs as its own process, so outage tests can freeze it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import fcntl
import hashlib
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from unittest import mock

import httpx
import pytest
from alembic import command
from alembic.config import Config
from litestar import Litestar
from opensearchpy import AsyncOpenSearch
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from app.asgi import create_app
from app.config import Settings
from app.db.engine import SERVER_SETTINGS
from app.db.tenant import DEFAULT_TENANT_ID, TENANT_SETTING
from bench.ports import free_port
from tests import services
from tests.costs import Costs

ROOT = services.ROOT
API_KEY = "test-key-" + uuid.uuid4().hex
ADMIN_KEY = "test-admin-key-" + uuid.uuid4().hex
LOG_DIR = services.LOCAL_DIR / "logs"
DEFAULT_TENANT_SETTING = {TENANT_SETTING: str(DEFAULT_TENANT_ID)}


STARTED: list = []  # services this run started (testcontainers, local scripts): stopped at its end

# Fixtures that start an API process of their own: the tests sharing one run on one worker.
OWN_API_FIXTURES = {
    "api",
    "api_without_opensearch",
    "api_without_embedder",
    "api_with_cross_encoder",
    "llm_api",
}


# `make test-fast`: only the tests that need no service, and no service started for them.
NO_SERVICES = os.environ.get("COGNIS_TEST_NO_SERVICES") == "1"
# A test needs the services when its fixtures reach these (every service fixture starts here).
SERVICE_FIXTURES = {"service_urls", "opensearch_cluster"}
# A test loads a real model in its own process when its fixtures reach these (the provisioned
# embedding model, the entity recognizer's spaCy and GiNZA models): seconds of loading and
# gigabytes resident per worker, so `make test-fast` leaves them out too (`-m "not models"`).
MODEL_FIXTURES = {"model_path", "recognizer"}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "services: needs Postgres, OpenSearch, the embedding server or a model server of its "
        "own (set from the test's fixtures, or by the module; `make test-fast` leaves these out)",
    )
    config.addinivalue_line(
        "markers",
        "models: loads a real model in the test's own process (set from the test's fixtures, "
        "or by the test; `make test-fast` leaves these out, CI runs them)",
    )
    config.addinivalue_line(
        "markers", "slow: takes more than 20 s on its own (a build: `make dist`'s artefacts)"
    )
    if not hasattr(config, "workerinput"):  # where every test's report arrives
        config.pluginmanager.register(Costs(services.LOCAL_DIR / "test-costs.json"), "costs")
    if NO_SERVICES:
        return
    if not hasattr(config, "workerinput"):  # the run's first process; workers inherit the URLs
        services.export(services.acquire(STARTED))
        services.start_embedding_server(STARTED)


def pytest_unconfigure(config: pytest.Config) -> None:
    while STARTED:
        STARTED.pop().stop()


def scheduling_group(item: pytest.Item) -> str | None:
    """The loadgroup (`--dist loadgroup`) of a test that shares something costly with others,
    so that one worker runs them one after another and starts it once: a process of its own
    (the first of OWN_API_FIXTURES it uses), else a module-scoped fixture of its module (a
    server, a loaded model, an exported ONNX model). Sent one by one, a module's tests
    interleave with other modules' on each worker, and every interleaving tears the module's
    fixture down and starts it again. A test marked with a group keeps that group."""
    if item.get_closest_marker("xdist_group"):
        return None
    fixtures = getattr(item, "fixturenames", ())
    own = sorted(OWN_API_FIXTURES.intersection(fixtures))
    if own:
        return own[0]
    info = getattr(item, "_fixtureinfo", None)
    definitions = info.name2fixturedefs.values() if info is not None else ()
    if any(defs[-1].scope == "module" for defs in definitions if defs):
        return item.nodeid.split("::", 1)[0]
    return None


# First: pytest-xdist's own hook (on each worker) reads the groups to name the tests.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    fast: list[pytest.Item] = []
    for item in items:
        fixtures = getattr(item, "fixturenames", ())
        group = scheduling_group(item)
        if group:
            item.add_marker(pytest.mark.xdist_group(group))
        if MODEL_FIXTURES.intersection(fixtures):
            item.add_marker(pytest.mark.models)
        if SERVICE_FIXTURES.intersection(fixtures) or item.get_closest_marker("services"):
            item.add_marker(pytest.mark.services)
        else:
            fast.append(item)
    if NO_SERVICES:
        config.hook.pytest_deselected(items=[i for i in items if i not in fast])
        items[:] = fast


@pytest.fixture(scope="session")
def service_urls() -> services.ServiceUrls:
    urls = services.acquire([])  # the URLs pytest_configure exported
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    return services.worker_database(urls, worker) if worker else urls


@pytest.fixture(scope="session")
def index_name() -> str:
    return f"cognis-test-{uuid.uuid4().hex[:8]}"


# How the service processes the tests start embed: through the run's embedding server.
EMBED_THROUGH_SERVER = (
    "COGNIS_EMBEDDING_BACKEND",
    "COGNIS_EMBEDDING_HTTP_URL",
    "COGNIS_EMBEDDING_HTTP_TIMEOUT_S",
)


@pytest.fixture(scope="session")
def base_env(service_urls: services.ServiceUrls, index_name: str) -> dict[str, str]:
    """Environment of every service process the tests start. They embed through the run's
    embedding server (the same model: `embed-serve` runs it with torch); the in-process API
    drops these three and embeds with the default local backends."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("COGNIS_")}
    roles = services.service_roles(service_urls.database_url)
    env.update(
        {
            # Requests run as a member of cognis_rw, background work as one of
            # cognis_background, migrations as the owner (roles made in `migrated`).
            "COGNIS_DATABASE_URL": roles.app_url,
            "COGNIS_WORKER_DATABASE_URL": roles.worker_url,
            "COGNIS_MIGRATION_DATABASE_URL": service_urls.database_url,
            "COGNIS_OPENSEARCH_URL": service_urls.opensearch_url,
            "COGNIS_OPENSEARCH_INDEX": index_name,
            "COGNIS_EMBEDDING_MODEL": services.embedding_model(),
            "COGNIS_EMBEDDING_BACKEND": "http",
            "COGNIS_EMBEDDING_HTTP_URL": f"{services.embedding_server_url()}/v1",
            # One server for every process of the run, on a busy machine: wait, never 503.
            "COGNIS_EMBEDDING_HTTP_TIMEOUT_S": "120",
            "COGNIS_API_KEY_HASHES": hashlib.sha256(API_KEY.encode()).hexdigest(),
            "COGNIS_ADMIN_KEY_HASHES": hashlib.sha256(ADMIN_KEY.encode()).hexdigest(),
            "COGNIS_RELAY_POLL_INTERVAL_S": "0.5",
            # Webhooks (tests/webhooks/): retries within a test's wait, a dead letter at 3.
            "COGNIS_WEBHOOK_MAX_ATTEMPTS": "3",
            "COGNIS_WEBHOOK_BACKOFF_BASE_S": "0.2",
            # The whole POST's deadline (connect, send, answer): 2 s timed out loopback
            # receivers that answer at once when both cores ran a full suite, so the default.
            "COGNIS_WEBHOOK_TIMEOUT_S": "10",
            # The expiry reaper runs when a test says so (tests/memories/test_expiry.py): an
            # expired memory must be seen hidden before any reaper has run.
            "COGNIS_EXPIRY_REAP_INTERVAL_S": "0",
            # So does the sentence worker (tests/retrieval/test_sentences_api.py): beside
            # every test's ingestion workers it would embed the whole database's backlog.
            "COGNIS_SENTENCE_VECTORS": "false",
            # Backpressure (app/ingest/backlog.py) only where a test asks for it
            # (tests/ingest/test_backpressure.py): tests queue messages for workers they start
            # later, and a busy run's backlog is not a test's subject.
            "COGNIS_INGEST_MAX_WAIT_S": "0",
            # And the index coverage check (tests/search_index/test_coverage.py): an API
            # process's check must not re-queue the index a test is deleting or rebuilding.
            "COGNIS_INDEX_CHECK_INTERVAL_S": "0",
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


async def run_cli_async(
    env: dict[str, str],
    *args: str,
    timeout: float = 300,  # noqa: ASYNC109
) -> subprocess.CompletedProcess:
    """`run_cli` for async tests: the event loop keeps running while the command does.

    A blocking call there would freeze the session loop's background tasks (a relay or an
    ingestion worker) mid-transaction, with their row locks held, and whatever the command
    needs to lock would wait for them until its lock_timeout."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        *args,
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        stdout, stderr = await asyncio.wait_for(process.communicate(), timeout)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise
    return subprocess.CompletedProcess(
        [sys.executable, "-m", *args], process.returncode, stdout.decode(), stderr.decode()
    )


async def alembic_async(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    result = await run_cli_async(env, "alembic", *args)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def _alembic_here(url: str, step: str, revision: str, *x: str) -> None:
    """`alembic [-x x...] <step> <revision>` of the database at `url`, in this process."""
    config = Config(str(ROOT / "alembic.ini"), cmd_opts=argparse.Namespace(x=list(x)))
    config.set_main_option("script_location", str(ROOT / "migrations"))
    config.attributes.update(database_url=url, configure_logger=False)
    getattr(command, step)(config, revision)


def _upgrade_here(url: str, revision: str) -> None:
    _alembic_here(url, "upgrade", revision)


async def upgrade_in_process(url: str, revision: str) -> None:
    """`alembic upgrade <revision>` of the database at `url`, in this process (migrations/env.py
    takes the URL from the config's attributes): the same migrations without a Python start and
    the app's imports, about 2 s of CPU each. For a database a test only needs at a revision;
    a test of the command itself (its output, exit status, `-x` options, a kill) runs
    `alembic_async`."""
    await asyncio.to_thread(_upgrade_here, url, revision)


@contextlib.contextmanager
def one_worker_at_a_time(name: str) -> Iterator[None]:
    """Across pytest-xdist workers (a file lock): for what touches the whole cluster."""
    with (Path(tempfile.gettempdir()) / f"cognis-tests-{name}.lock").open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@pytest.fixture(scope="session")
def migrated(base_env: dict[str, str]) -> dict[str, str]:
    """A fresh schema: downgrade whatever a previous run left, then upgrade to head. The
    migrations create cluster-wide roles (0007_tenants), so workers migrate one at a time: two
    granting the same role membership at once collide on a fresh cluster. In this process, as
    `upgrade_in_process` does (no Python start and imports of the app twice per worker): the
    `alembic` command itself is what tests/test_migrations.py runs."""
    url = base_env["COGNIS_MIGRATION_DATABASE_URL"]
    with one_worker_at_a_time("migrations"):
        _alembic_here(url, "downgrade", "base", "force=true")
        _alembic_here(url, "upgrade", "head")
        asyncio.run(services.create_service_roles(url))
    return base_env


class ServiceProcess:
    """A `python -m app ...` subprocess of this session, with its own log file."""

    running: list[ServiceProcess] = []  # every one of this session, for outage tests to freeze

    def __init__(self, env: dict[str, str], name: str, *args: str) -> None:
        self.env = env
        LOG_DIR.mkdir(parents=True, exist_ok=True)
        self.log_path = LOG_DIR / f"test-{name}.log"
        self._log = self.log_path.open("w")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "app", *args],
            cwd=ROOT,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        ServiceProcess.running.append(self)

    def stop(self) -> None:
        if self in ServiceProcess.running:
            ServiceProcess.running.remove(self)
        services.terminate(self.process)
        self._log.close()

    def log_text(self) -> str:
        self._log.flush()
        return self.log_path.read_text()


@contextlib.contextmanager
def only_running(*keep: ServiceProcess) -> Iterator[None]:
    """Freeze every other service process of the session (and the relay loops in them)."""
    frozen = [p for p in ServiceProcess.running if p not in keep]
    for process in frozen:
        process.process.send_signal(signal.SIGSTOP)
    try:
        yield
    finally:
        for process in frozen:
            process.process.send_signal(signal.SIGCONT)


class ApiProcess(ServiceProcess):
    def __init__(self, env: dict[str, str], name: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        # No entity worker unless the test asks for one (COGNIS_ENTITIES=true): each would read
        # every pending memory of the worker's database, Japanese ones through GiNZA (~0.9 GB
        # resident), and the session keeps several of these processes alive at once.
        # Its webhook dispatcher delivers the shared database's events too, to the tests'
        # receivers on loopback (refused at connect time otherwise: a spurious failed attempt).
        env = {"COGNIS_ENTITIES": "false", "COGNIS_WEBHOOK_ALLOW_PRIVATE": "true", **env}
        super().__init__(env, name, "serve", "--port", str(self.port))

    def client(self, timeout: float = 60) -> httpx.AsyncClient:
        """A client of this process's API over HTTP, with the session's key."""
        return httpx.AsyncClient(base_url=self.url, headers={"X-API-Key": API_KEY}, timeout=timeout)

    def wait_ready(self, timeout: float = 180, path: str = "/ready") -> None:
        """Until `path` answers 200: `/ready` (serving), or `/health` for a process that is
        alive but never ready (a store or the model service down on purpose)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                break
            try:
                if httpx.get(f"{self.url}{path}", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"API did not become ready; log:\n{self.log_path.read_text()[-4000:]}")


@pytest.fixture(scope="session")
def api(migrated: dict[str, str]) -> Iterator[ApiProcess]:
    # The session's API reads entities as a deployment does (the MCP entity tests need them).
    process = ApiProcess({**migrated, "COGNIS_ENTITIES": "true"}, "api")
    process.wait_ready()
    yield process
    process.stop()


@pytest.fixture(scope="session")
def dead_opensearch_env(migrated: dict[str, str]) -> dict[str, str]:
    """Same database, but OpenSearch at a port where nothing listens: an outage."""
    return {**migrated, "COGNIS_OPENSEARCH_URL": f"http://127.0.0.1:{free_port()}"}


@pytest.fixture(scope="session")
def api_without_opensearch(dead_opensearch_env: dict[str, str]) -> Iterator[ApiProcess]:
    env = {**dead_opensearch_env, "COGNIS_RELAY_IN_API": "false"}
    process = ApiProcess(env, "api-no-opensearch")
    process.wait_ready()
    yield process
    process.stop()


@pytest.fixture(scope="session")
def dead_embedder_url() -> str:
    """A port where no embedding server listens (tests/api/test_embedder_outage.py)."""
    return f"http://127.0.0.1:{free_port()}/v1"


@pytest.fixture(scope="session")
def api_without_embedder(migrated: dict[str, str], dead_embedder_url: str) -> Iterator[ApiProcess]:
    """An API whose embedding server cannot be reached: the outage tests and the clients'
    retry tests share it (one process for the run, on the worker of its loadgroup)."""
    env = {
        **migrated,
        "COGNIS_EMBEDDING_BACKEND": "http",
        "COGNIS_EMBEDDING_HTTP_URL": dead_embedder_url,
        "COGNIS_EMBEDDING_HTTP_MAX_RETRIES": "1",
        "COGNIS_EMBEDDING_HTTP_BACKOFF_BASE_S": "0.01",
        "COGNIS_INGEST_WORKER_IN_API": "false",
    }
    process = ApiProcess(env, "api-no-embedder")
    process.wait_ready(path="/health")  # never ready, but it starts
    yield process
    process.stop()


@pytest.fixture(scope="session")
def relay(migrated: dict[str, str]) -> Iterator[ServiceProcess]:
    """The outbox relay of the in-process API, in its own process so tests can freeze it.
    Its webhook dispatcher may reach the tests' receivers on loopback."""
    env = {**migrated, "COGNIS_WEBHOOK_ALLOW_PRIVATE": "true"}
    process = ServiceProcess(env, "relay", "relay")
    yield process
    process.stop()


@pytest.fixture
def backfill_alone(relay: ServiceProcess) -> Iterator[None]:
    """Every other service process frozen for the test (the relay runs): the session's API
    process's entity worker reads the whole database's new memories whenever its model is
    idle, and locks a row it stores, so a backfill a test runs would skip that row (SKIP
    LOCKED) or find the memories already read."""
    with only_running(relay):
        yield


class InProcessApi:
    """The real app in the test process: httpx's ASGI transport, the lifespan entered once."""

    url = "http://cognis.test"

    def __init__(self, env: dict[str, str]) -> None:
        env = {k: v for k, v in env.items() if k not in EMBED_THROUGH_SERVER}
        with mock.patch.dict(os.environ, env, clear=True):
            settings = Settings()
        self.app = create_app(settings)

    def client(self, headers: dict[str, str] | None = None) -> httpx.AsyncClient:
        transport = httpx.ASGITransport(app=self.app)
        return httpx.AsyncClient(transport=transport, base_url=self.url, headers=headers)


@contextlib.asynccontextmanager
async def lifespan_running(app: Litestar) -> AsyncIterator[None]:
    """The app's lifespan entered for the block: its start and end in one task of their own,
    as anyio requires (a fixture's setup and teardown need not share one)."""
    started, stop = asyncio.Event(), asyncio.Event()

    async def serve() -> None:
        async with app.lifespan():
            started.set()
            await stop.wait()

    task, up = asyncio.create_task(serve()), asyncio.create_task(started.wait())
    await asyncio.wait([task, up], return_when="FIRST_COMPLETED")
    up.cancel()
    if task.done():
        task.result()  # start-up failed: raise its error here
    try:
        yield
    finally:
        stop.set()
        await task


@pytest.fixture(scope="session")
async def inprocess_api(
    migrated: dict[str, str], relay: ServiceProcess
) -> AsyncIterator[InProcessApi]:
    # No background work of its own: the relay runs in its own process, and the ingestion
    # worker only for the tests that ask for it (`ingest_worker`). Its own queue: the
    # session's API process (`api`) runs batch and ingestion workers on the default queue
    # of the same database, and must not take a job a test is about to spoil or watch.
    api = InProcessApi(
        {
            **migrated,
            "COGNIS_RELAY_IN_API": "false",
            "COGNIS_INGEST_WORKER_IN_API": "false",
            "COGNIS_INGEST_QUEUE": "in-process",
        }
    )
    async with lifespan_running(api.app):
        yield api


@pytest.fixture
def slow_estimate(inprocess_api: InProcessApi, monkeypatch: pytest.MonkeyPatch) -> None:
    """The in-process API's learnt model speed fixed at 100 ms a character (10 s a memory of
    100): a batch of a few short memories is more model work than the 55 s bulk deadline, so
    it is answered 202 with a job; the real model, much faster, writes the job at once."""
    batcher = inprocess_api.app.state.runtime.embedder.batcher
    monkeypatch.setattr(batcher, "seconds_per_unit", 0.1)
    monkeypatch.setattr(batcher, "_learn", lambda cost, seconds: None)


@pytest.fixture(scope="session")
async def ingest_worker(inprocess_api: InProcessApi) -> AsyncIterator[None]:
    """The in-process API's ingestion worker, started by the first test that sends messages
    through that API and kept for the rest of the session (of this pytest-xdist worker).

    Tests that do not need it never start it: it polls ingest_tasks in the session's event
    loop, and a claim frozen mid-transaction by anything that blocks the loop holds its row
    locks until the loop runs again."""
    runtime = inprocess_api.app.state.runtime
    stop = asyncio.Event()
    task = asyncio.create_task(runtime.ingest_worker.run_forever(stop))
    yield
    stop.set()
    await task


@pytest.fixture
async def client(inprocess_api: InProcessApi) -> AsyncIterator[httpx.AsyncClient]:
    async with inprocess_api.client({"X-API-Key": API_KEY}) as http:
        yield http


@pytest.fixture
async def anonymous(inprocess_api: InProcessApi) -> AsyncIterator[httpx.AsyncClient]:
    async with inprocess_api.client() as http:
        yield http


@pytest.fixture
async def admin(inprocess_api: InProcessApi) -> AsyncIterator[httpx.AsyncClient]:
    async with inprocess_api.client({"X-API-Key": ADMIN_KEY}) as http:
        yield http


@pytest.fixture(scope="session")
async def db(migrated: dict[str, str]) -> AsyncIterator[AsyncEngine]:
    """The owner's connection, bound to the default tenant (whose rows the API key's are)."""
    engine = create_async_engine(
        migrated["COGNIS_MIGRATION_DATABASE_URL"],
        connect_args={"server_settings": {**SERVER_SETTINGS, **DEFAULT_TENANT_SETTING}},
    )
    yield engine
    await engine.dispose()


@pytest.fixture
async def owner(migrated: dict[str, str]) -> AsyncIterator[AsyncEngine]:
    """The owner's connection with no tenant set: it sees every tenant's rows (a member of
    cognis_background), and may grant and make roles."""
    engine = create_async_engine(migrated["COGNIS_MIGRATION_DATABASE_URL"])
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
