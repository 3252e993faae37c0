"""A backup restored into a fresh cluster serves the same searches (issue 42, item 2): a new
Postgres cluster made with initdb (no role, no database of the service's), its owner made by
its superuser as a DBA would, the service's logins from scripts/service-roles.sql, then
`python -m app restore` and `python -m app reindex --recreate`, and an API process on the
restored database answers a user's searches with the memories the original answers with."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from bench.ports import free_port
from tests.conftest import API_KEY, ROOT, ApiProcess, run_cli_async
from tests.db.test_backup import backed_up
from tests.services import LOCAL_DIR

PG_BIN = Path(f"/usr/lib/postgresql/{os.environ.get('COGNIS_PG_MAJOR', '15')}/bin")
PASSWORD = uuid.uuid4().hex
QUERIES = ["Where does Ilse live now?", "What does Ilse do for work?", "Which pets?"]
FACTS = [
    "Ilse lives in Ghent with her partner.",
    "Ilse works as a luthier, repairing violins.",
    "Ilse has two cats named Pim and Pom.",
    "Ilse swims in the sea every Sunday.",
]


def as_postgres(*argv: str, **kwargs: object) -> subprocess.CompletedProcess:
    """A command as the OS user Postgres runs as (peer authentication on the socket)."""
    prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    return subprocess.run(
        [*prefix, *argv], capture_output=True, text=True, check=True, timeout=180, **kwargs
    )  # type: ignore[call-overload]


@pytest.fixture(scope="module")
def fresh_cluster() -> Iterator[tuple[int, str]]:
    """An initdb'd cluster on a free port: its socket folder and port. Removed afterwards."""
    if not (PG_BIN / "initdb").exists():
        pytest.skip("a fresh cluster needs the local Postgres binaries (scripts/services.sh)")
    folder = LOCAL_DIR / f"fresh-cluster-{uuid.uuid4().hex[:8]}"
    folder.mkdir(parents=True)
    if os.geteuid() == 0:
        shutil.chown(folder, "postgres")
    data, port = folder / "data", free_port()
    as_postgres(str(PG_BIN / "initdb"), "-D", str(data), "--auth-local=peer",
                "--auth-host=scram-sha-256", "-E", "UTF8", "--locale=C.UTF-8")  # fmt: skip
    as_postgres(
        str(PG_BIN / "pg_ctl"), "-D", str(data), "-w", "-l", str(folder / "log"), "-o",
        f"-p {port} -k {folder} -c listen_addresses=127.0.0.1", "start",
    )  # fmt: skip
    try:
        yield port, str(folder)
    finally:
        subprocess.run(
            ["runuser", "-u", "postgres", "--", str(PG_BIN / "pg_ctl"), "-D", str(data),
             "-m", "immediate", "stop"],
            capture_output=True, check=False,
        )  # fmt: skip
        shutil.rmtree(folder, ignore_errors=True)


def superuser_sql(cluster: tuple[int, str], database: str, sql: str, **variables: str) -> None:
    port, socket = cluster
    flags = [f"--set={name}={value}" for name, value in variables.items()]
    as_postgres(str(PG_BIN / "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", socket,
                "-p", str(port), "-d", database, *flags, input=sql)  # fmt: skip


def login(cluster: tuple[int, str], role: str, database: str) -> str:
    return f"postgresql+asyncpg://{role}:{PASSWORD}@127.0.0.1:{cluster[0]}/{database}"


async def searches(api_url: str, user: str) -> list[list[str]]:
    async with httpx.AsyncClient(base_url=api_url, headers={"X-API-Key": API_KEY}) as http:
        found = []
        for query in QUERIES:
            answer = await http.post(
                f"/v1/users/{user}/search",
                json={"query": query, "top_k": 3, "consistency": "indexed"},
                timeout=120,
            )
            assert answer.status_code == 200, answer.text
            body = answer.json()
            assert not body.get("missing_legs"), body
            found.append([hit["memory"]["content"] for hit in body["results"]])
        return found


async def test_a_backup_restored_into_a_fresh_cluster_answers_the_same_searches(
    migrated: dict[str, str],
    owner: AsyncEngine,
    api: ApiProcess,
    fresh_cluster: tuple[int, str],
    tmp_path: Path,
) -> None:
    user = f"ilse-{uuid.uuid4().hex[:8]}"
    async with httpx.AsyncClient(base_url=api.url, headers={"X-API-Key": API_KEY}) as http:
        for fact in FACTS:
            made = await http.post(
                f"/v1/users/{user}/memories", json={"content": fact}, timeout=120
            )
            assert made.status_code == 201, made.text
    original = await searches(api.url, user)
    assert original[0][0] == FACTS[0]

    dump = await backed_up(migrated, owner, tmp_path)

    # The DBA's part on the new cluster: an owner that may create databases (not roles), the
    # vector extension where new databases get it, and the service's roles (the role-admin step).
    superuser_sql(
        fresh_cluster, "postgres",
        "CREATE ROLE cognis_owner LOGIN CREATEDB PASSWORD :'pw';",
        pw=PASSWORD,
    )  # fmt: skip
    superuser_sql(fresh_cluster, "template1", "CREATE EXTENSION vector;")
    superuser_sql(
        fresh_cluster, "postgres", (ROOT / "scripts" / "service-roles.sql").read_text(),
        owner="cognis_owner", app="cognis_app", worker="cognis_worker", app_pw=PASSWORD,
        worker_pw=PASSWORD,
    )  # fmt: skip

    restored = {
        **migrated,
        "COGNIS_MIGRATION_DATABASE_URL": login(fresh_cluster, "cognis_owner", "cognis"),
        "COGNIS_DATABASE_URL": login(fresh_cluster, "cognis_app", "cognis"),
        "COGNIS_WORKER_DATABASE_URL": login(fresh_cluster, "cognis_worker", "cognis"),
        "COGNIS_OPENSEARCH_INDEX": f"cognis-restored-{uuid.uuid4().hex[:8]}",
    }
    restored.pop("COGNIS_READ_DATABASE_URL", None)
    owner_postgres = {
        **restored,
        "COGNIS_MIGRATION_DATABASE_URL": login(fresh_cluster, "cognis_owner", "postgres"),
    }
    done = await run_cli_async(owner_postgres, "app", "restore", str(dump), "--into", "cognis")
    assert done.returncode == 0, done.stderr
    assert "as dumped" in done.stdout
    done = await run_cli_async(restored, "app", "reindex", "--recreate", timeout=600)
    assert done.returncode == 0, done.stderr

    process = ApiProcess(restored, "api-restored")
    try:
        await asyncio.to_thread(process.wait_ready)
        assert await searches(process.url, user) == original
    finally:
        process.stop()
