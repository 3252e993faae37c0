"""The service behind PgBouncer in transaction mode (scripts/pgbouncer.sh, COGNIS_DB_POOLER):
an API process whose database URLs go through the pooler serves concurrent writes and
searches of two tenants, every answer its own tenant's, with no prepared statement lost
between server connections, and its relay still delivers to OpenSearch."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator

import httpx
import pytest
from sqlalchemy.engine import make_url

from bench.ports import free_port
from tests.conftest import ADMIN_KEY, ROOT, ApiProcess

SCRIPT = ROOT / "scripts" / "pgbouncer.sh"


def through(url: str, port: int) -> str:
    return make_url(url).set(host="127.0.0.1", port=port).render_as_string(hide_password=False)


@pytest.fixture(scope="module")
def bouncer(migrated: dict[str, str]) -> Iterator[int]:
    """A PgBouncer of this module's own, for the test database's roles."""
    server = make_url(migrated["COGNIS_DATABASE_URL"])
    if server.host not in ("127.0.0.1", "localhost"):
        pytest.skip("PgBouncer is started on loopback, in front of a local Postgres")
    folder = ROOT / ".local" / f"pgbouncer-test-{uuid.uuid4().hex[:8]}"
    folder.mkdir(parents=True)
    users = folder / "users.txt"
    users.write_text(
        "".join(
            f'"{make_url(migrated[name]).username}" "{make_url(migrated[name]).password}"\n'
            for name in ("COGNIS_DATABASE_URL", "COGNIS_WORKER_DATABASE_URL")
        )
    )
    port = free_port()
    env = {
        **{name: value for name, value in os.environ.items() if not name.startswith("COGNIS_")},
        "COGNIS_PGBOUNCER_DIR": str(folder / "run"),
        "COGNIS_PGBOUNCER_USERLIST": str(users),
        "COGNIS_PGBOUNCER_PORT": str(port),
        "COGNIS_PG_PORT": str(server.port),
    }
    started = subprocess.run(
        ["bash", str(SCRIPT), "start"], env=env, capture_output=True, text=True
    )
    assert started.returncode == 0, started.stderr
    try:
        yield port
    finally:
        subprocess.run(["bash", str(SCRIPT), "stop"], env=env, capture_output=True, check=False)
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def pooled_api(migrated: dict[str, str], bouncer: int) -> Iterator[ApiProcess]:
    env = {
        **migrated,
        "COGNIS_DB_POOLER": "transaction",
        "COGNIS_DATABASE_URL": through(migrated["COGNIS_DATABASE_URL"], bouncer),
        "COGNIS_WORKER_DATABASE_URL": through(migrated["COGNIS_WORKER_DATABASE_URL"], bouncer),
        # The relay's LISTEN, past the pooler.
        "COGNIS_DIRECT_DATABASE_URL": migrated["COGNIS_DATABASE_URL"],
        # More clients than the pooler has server connections (20).
        "COGNIS_DB_POOL_SIZE": "30",
    }
    process = ApiProcess(env, "api-pgbouncer")
    process.wait_ready()
    yield process
    process.stop()


async def new_tenant_key(api: ApiProcess, label: str) -> str:
    async with httpx.AsyncClient(
        base_url=api.url, headers={"X-API-Key": ADMIN_KEY}, timeout=60
    ) as admin:
        name = f"{label}-{uuid.uuid4().hex[:8]}"
        created = await admin.post("/admin/v1/tenants", json={"name": name})
        assert created.status_code == 201, created.text
        issued = await admin.post(f"/admin/v1/tenants/{name}/keys", json={"name": "k"})
        assert issued.status_code == 201, issued.text
        return issued.json()["key"]


async def test_two_tenants_through_the_pooler_see_only_their_own(pooled_api: ApiProcess) -> None:
    keys = {label: await new_tenant_key(pooled_api, label) for label in ("north", "south")}
    user = f"shared-name-{uuid.uuid4().hex[:6]}"  # the same user id in both tenants

    async def tenant_work(label: str, key: str) -> tuple[set[str], list[set[str]]]:
        async with httpx.AsyncClient(
            base_url=pooled_api.url, headers={"X-API-Key": key}, timeout=120
        ) as http:
            writes = [
                http.post(
                    f"/v1/users/{user}/memories",
                    json={"content": f"{label} fact {n}: the {label} office has {n} plants"},
                )
                for n in range(12)
            ]
            answers = await asyncio.gather(*writes)
            assert all(a.status_code == 201 for a in answers), [a.text for a in answers]
            searches = [
                http.post(
                    f"/v1/users/{user}/search",
                    json={"query": "how many plants in the office?", "consistency": "indexed"},
                )
                for _ in range(8)
            ]
            found = await asyncio.gather(*searches)
            assert all(f.status_code == 200 for f in found), [f.text for f in found]
            listed = await http.get(f"/v1/users/{user}/memories", params={"limit": 100})
            assert listed.status_code == 200, listed.text
            contents = {m["content"] for m in listed.json()["items"]}
            hits = [{r["memory"]["content"] for r in f.json()["results"]} for f in found]
            for body in found:
                # The relay delivered through LISTEN past the pooler: BM25 answered too.
                assert "bm25" not in body.json().get("missing_legs", []), body.json()
            return contents, hits

    results = await asyncio.gather(*(tenant_work(label, key) for label, key in keys.items()))
    for (label, _), (contents, hits) in zip(keys.items(), results, strict=True):
        assert len(contents) == 12 and all(c.startswith(f"{label} fact") for c in contents)
        assert all(hit and all(c.startswith(f"{label} fact") for c in hit) for hit in hits)
