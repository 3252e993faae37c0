"""Where the test session's Postgres and OpenSearch come from.

1. COGNIS_TEST_DATABASE_URL and COGNIS_TEST_OPENSEARCH_URL, when both are set;
2. else testcontainers, where a Docker engine answers;
3. else the project's own local services, started with scripts/services.sh (as `make up` does).

The run's first process acquires them and exports both URLs, so pytest-xdist's workers (which
inherit its environment) reach the same services; each worker then migrates a database of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

import asyncpg
from sqlalchemy.engine import make_url

from bench.ports import free_port

ROOT = Path(__file__).resolve().parent.parent
LOCAL_DIR = Path(os.environ.get("COGNIS_LOCAL_DIR", ROOT / ".local"))
CACHE_DIR = Path(
    os.environ.get(
        "COGNIS_CACHE_DIR",
        Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "cognis-memory",
    )
)


@dataclass(frozen=True)
class ServiceUrls:
    database_url: str
    opensearch_url: str
    origin: str


def _read_env_file(path: Path) -> dict[str, str]:
    values: dict[str, str] = {}
    for line in path.read_text().splitlines():
        if "=" in line and not line.lstrip().startswith("#"):
            key, value = line.split("=", 1)
            values[key.strip()] = value.strip()
    return values


def _docker_available() -> bool:
    if shutil.which("docker") is None:
        return False
    try:
        return subprocess.run(["docker", "info"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _from_containers(stack: list) -> ServiceUrls:
    from testcontainers.opensearch import OpenSearchContainer
    from testcontainers.postgres import PostgresContainer

    postgres = PostgresContainer("pgvector/pgvector:pg16", driver="asyncpg")
    opensearch = OpenSearchContainer("opensearchproject/opensearch:2.19.1")
    postgres.start()
    stack.append(postgres)
    opensearch.start()
    stack.append(opensearch)
    host = opensearch.get_container_host_ip()
    port = opensearch.get_exposed_port(9200)
    return ServiceUrls(postgres.get_connection_url(), f"http://{host}:{port}", "testcontainers")


class LocalServices:
    """The project's own services; stopped afterwards only if this session started them."""

    script = str(ROOT / "scripts" / "services.sh")

    def __init__(self) -> None:
        status = subprocess.run(["bash", self.script, "status"], capture_output=True)
        self.started_here = status.returncode != 0
        subprocess.run(["bash", self.script, "start", "all"], check=True)

    def stop(self) -> None:
        if self.started_here:
            subprocess.run(["bash", self.script, "stop", "all"], check=False)


def _from_local_scripts(stack: list) -> ServiceUrls:
    stack.append(LocalServices())
    env = _read_env_file(LOCAL_DIR / "cognis.env")
    return ServiceUrls(env["COGNIS_TEST_DATABASE_URL"], env["COGNIS_OPENSEARCH_URL"], "local")


def acquire(stack: list) -> ServiceUrls:
    database_url = os.environ.get("COGNIS_TEST_DATABASE_URL")
    opensearch_url = os.environ.get("COGNIS_TEST_OPENSEARCH_URL")
    if database_url and opensearch_url:
        return ServiceUrls(database_url, opensearch_url, "environment")
    if _docker_available():
        return _from_containers(stack)
    return _from_local_scripts(stack)


def export(urls: ServiceUrls) -> None:
    """Make the URLs this process's environment, for the workers it starts."""
    os.environ["COGNIS_TEST_DATABASE_URL"] = urls.database_url
    os.environ["COGNIS_TEST_OPENSEARCH_URL"] = urls.opensearch_url


def worker_database(urls: ServiceUrls, worker: str) -> ServiceUrls:
    """A database of this worker's own beside the configured one, created on first use."""
    url = make_url(urls.database_url)
    name = f"{url.database}_{worker}"

    async def create() -> None:
        connection = await asyncpg.connect(
            user=url.username,
            password=url.password,
            host=url.host,
            port=url.port,
            database=url.database,
        )
        try:
            if not await connection.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", name):
                await connection.execute(f'CREATE DATABASE "{name}"')
        finally:
            await connection.close()

    # Its own thread and event loop: the test session's loop is not this function's to touch.
    with ThreadPoolExecutor(1) as thread:
        thread.submit(asyncio.run, create()).result()
    worker_url = url.set(database=name).render_as_string(hide_password=False)
    return replace(urls, database_url=worker_url)


def terminate(process: subprocess.Popen) -> None:
    """SIGTERM, and SIGKILL if it has not ended within 30 s."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()


class EmbeddingServer:
    """The run's one `python -m app embed-serve` (no database settings, as an embedder container
    runs it). The API and CLI processes the tests start embed through it (the `http` backend),
    so none of them loads the model itself: a model load costs a process start about half a
    minute of CPU on a small machine. The in-process API keeps the default local backends."""

    def __init__(
        self,
        model: str,
        settings: dict[str, str] | None = None,
        log_name: str = "test-embed-serve.log",
    ) -> None:
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("COGNIS_")}
        # Queries share the model: one load, as quick a start as the run can have.
        env.update(
            {
                "COGNIS_EMBEDDING_MODEL": model,
                "COGNIS_QUERY_EMBEDDING_BACKEND": "same",
                "HF_HUB_OFFLINE": "1",
                **(settings or {}),
            }
        )
        log_dir = LOCAL_DIR / "logs"
        log_dir.mkdir(parents=True, exist_ok=True)
        self._log = (log_dir / log_name).open("w")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "app", "embed-serve", "--port", str(port)],
            cwd=ROOT,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    def stop(self) -> None:
        terminate(self.process)
        self._log.close()


def start_embedding_server(stack: list) -> None:
    """Start the run's embedding server unless COGNIS_TEST_EMBEDDING_HTTP_URL names one; the
    URL goes into this process's environment, for the workers it starts."""
    if not os.environ.get("COGNIS_TEST_EMBEDDING_HTTP_URL"):
        server = EmbeddingServer(embedding_model())
        stack.append(server)
        os.environ["COGNIS_TEST_EMBEDDING_HTTP_URL"] = server.url


def embedding_server_url(timeout: float = 300) -> str:
    """The run's embedding server, once its model is loaded (it loads while workers migrate)."""
    url = os.environ["COGNIS_TEST_EMBEDDING_HTTP_URL"]
    return wait_until_loaded(url, "test-embed-serve.log", timeout)


def wait_until_loaded(url: str, log_name: str, timeout: float = 300) -> str:
    """`url` once the embedding server there has loaded its model(s); its log's tail if not."""
    import httpx

    deadline = time.monotonic() + timeout
    while True:
        try:
            if httpx.get(f"{url}/health", timeout=5).json().get("loaded"):
                return url
        except (httpx.HTTPError, ValueError):
            pass
        if time.monotonic() > deadline:
            log = LOCAL_DIR / "logs" / log_name
            tail = log.read_text()[-3000:] if log.exists() else ""
            raise RuntimeError(f"the embedding server at {url} did not load:\n{tail}")
        time.sleep(0.5)


def embedding_model() -> str:
    """The model the tests embed with: a setting, else the provisioned local folder."""
    configured = os.environ.get("COGNIS_TEST_EMBEDDING_MODEL")
    if configured:
        return configured
    for name in ("all-mpnet-base-v2", "all-MiniLM-L6-v2"):
        folder = CACHE_DIR / "models" / name
        if (folder / "modules.json").exists():
            return str(folder)
    raise RuntimeError(
        "no embedding model found: run scripts/install-models.sh or set COGNIS_TEST_EMBEDDING_MODEL"
    )


@dataclass(frozen=True)
class ServiceRoles:
    """Login roles of the test database: its name plus _app / _worker (roles are cluster-wide,
    so each test database has its own), with passwords derived from the owner's URL."""

    app: str
    worker: str
    password: str
    app_url: str
    worker_url: str


def service_roles(owner_url: str) -> ServiceRoles:
    from sqlalchemy.engine import make_url

    url = make_url(owner_url)
    password = hashlib.sha256(f"cognis-test-roles:{owner_url}".encode()).hexdigest()[:32]
    app, worker = f"{url.database}_app", f"{url.database}_worker"

    def login(role: str) -> str:
        return url.set(username=role, password=password).render_as_string(hide_password=False)

    return ServiceRoles(app, worker, password, login(app), login(worker))


def role_admin_url(owner_url: str) -> str:
    """Who makes the tests' logins: the owner has no CREATEROLE (issue 53), so the test kit's
    role admin (COGNIS_TEST_ROLE_ADMIN_URL, written by scripts/services.sh into cognis.env);
    where none is configured, the owner of a cluster provisioned before that change."""
    configured = os.environ.get("COGNIS_TEST_ROLE_ADMIN_URL")
    if not configured and (LOCAL_DIR / "cognis.env").exists():
        configured = _read_env_file(LOCAL_DIR / "cognis.env").get("COGNIS_TEST_ROLE_ADMIN_URL")
    return configured or owner_url


async def create_service_roles(owner_url: str) -> ServiceRoles:
    """Create (or reset) the login roles, as the role admin (role_admin_url)."""
    from sqlalchemy import text
    from sqlalchemy.ext.asyncio import create_async_engine

    from app.db.roles import LOGIN_SETTINGS

    roles = service_roles(owner_url)
    engine = create_async_engine(role_admin_url(owner_url), isolation_level="AUTOCOMMIT")
    try:
        async with engine.connect() as connection:
            for role, group in ((roles.app, "cognis_rw"), (roles.worker, "cognis_background")):
                exists = await connection.scalar(
                    text("SELECT count(*) FROM pg_roles WHERE rolname = :r"), {"r": role}
                )
                if not exists:
                    await connection.execute(text(f'CREATE ROLE "{role}" LOGIN'))
                await connection.execute(
                    text(f"ALTER ROLE \"{role}\" LOGIN PASSWORD '{roles.password}'")
                )
                await connection.execute(text(f'GRANT {group} TO "{role}"'))
                # The bounds scripts/service-roles.sql gives the service's logins.
                kind = "requests" if role == roles.app else "background"
                for name, value in LOGIN_SETTINGS[kind]:
                    await connection.execute(text(f"ALTER ROLE \"{role}\" SET {name} = '{value}'"))
    finally:
        await engine.dispose()
    return roles


@contextlib.asynccontextmanager
async def login_role(
    owner_url: str, *groups: str, connect: bool | None = None
) -> AsyncIterator[tuple[str, str]]:
    """A login role of one test's own, member of `groups` (e.g. cognis_analyst): its name and
    URL. It may connect to the database of `owner_url` as a DBA lets a reader in (0023): an
    analyst once bound to a tenant (analyst_tenants' trigger grants it), any other role at
    once unless `connect` is False. Made and dropped by the role admin (role_admin_url), its
    grants in this database revoked by the owner afterwards."""
    from sqlalchemy import text
    from sqlalchemy.engine import make_url
    from sqlalchemy.ext.asyncio import create_async_engine

    url = make_url(owner_url)
    name, password = f"cognis_t_{uuid.uuid4().hex[:10]}", uuid.uuid4().hex
    engine = create_async_engine(owner_url, isolation_level="AUTOCOMMIT")
    admin = create_async_engine(role_admin_url(owner_url), isolation_level="AUTOCOMMIT")
    try:
        async with admin.connect() as connection:
            await connection.execute(text(f"CREATE ROLE {name} LOGIN PASSWORD '{password}'"))
            for group in groups:
                await connection.execute(text(f"GRANT {group} TO {name}"))
        async with engine.connect() as connection:
            if connect if connect is not None else "cognis_analyst" not in groups:
                await connection.execute(
                    text(f'GRANT CONNECT ON DATABASE "{url.database}" TO {name}')
                )
        try:
            yield (
                name,
                url.set(username=name, password=password).render_as_string(hide_password=False),
            )
        finally:
            async with engine.connect() as connection:
                await connection.execute(
                    text("DELETE FROM analyst_tenants WHERE role_name = :r"), {"r": name}
                )
                granted = await connection.execute(
                    text(
                        "SELECT DISTINCT table_name FROM information_schema.role_table_grants "
                        "WHERE grantee = :r"
                    ),
                    {"r": name},
                )
                for table in granted.scalars().all():
                    await connection.execute(text(f'REVOKE ALL ON "{table}" FROM {name}'))
                await connection.execute(
                    text(f'REVOKE ALL ON DATABASE "{url.database}" FROM {name}')
                )
            async with admin.connect() as connection:
                await connection.execute(text(f"DROP ROLE {name}"))
    finally:
        await engine.dispose()
        await admin.dispose()
