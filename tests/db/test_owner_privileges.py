"""The tables' owner has no CREATEROLE (issue 53): on PostgreSQL 15 a CREATEROLE role may grant
itself pg_execute_server_program, and `COPY ... FROM PROGRAM` then runs a shell as the server's
OS account. The role-admin step (scripts/service-roles.sql, run by a superuser) makes every role
the service and the migrations use, so an owner without CREATEROLE migrates a new database to
head. Against the real cluster, with an owner and logins of this test's own."""

from __future__ import annotations

import asyncio
import os
import subprocess
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import pytest
from sqlalchemy.engine import make_url

from app.db.backup import _connect as connect_url
from tests.conftest import _upgrade_here, one_worker_at_a_time
from tests.services import ROOT, role_admin_url

PSQL = Path(f"/usr/lib/postgresql/{os.environ.get('COGNIS_PG_MAJOR', '15')}/bin/psql")
pytestmark = pytest.mark.skipif(
    not PSQL.exists(), reason="needs the local Postgres client (scripts/install-postgres.sh)"
)


@dataclass(frozen=True)
class Provisioned:
    owner: str
    app: str
    worker: str
    password: str
    owner_url: str  # to the `postgres` database


async def _connect(url: str, database: str | None = None) -> asyncpg.Connection:
    if database:
        url = make_url(url).set(database=database).render_as_string(hide_password=False)
    return await connect_url(url)


def _role_admin_step(admin_url: str, provisioned: Provisioned) -> None:
    """scripts/service-roles.sql, as scripts/services.sh runs it (psql, its variables)."""
    url = make_url(admin_url)
    subprocess.run(
        [str(PSQL), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", str(url.host), "-p", str(url.port),
         "-U", str(url.username), "-d", "postgres",
         "-v", f"owner={provisioned.owner}", "-v", f"app={provisioned.app}",
         "-v", f"worker={provisioned.worker}", "-v", f"app_pw={provisioned.password}",
         "-v", f"worker_pw={provisioned.password}",
         "-f", str(ROOT / "scripts" / "service-roles.sql")],
        env={**os.environ, "PGPASSWORD": str(url.password)},
        check=True, capture_output=True, text=True,
    )  # fmt: skip


@pytest.fixture
async def provisioned(migrated: dict[str, str]) -> AsyncIterator[Provisioned]:
    """An owner as an existing deployment had it (LOGIN CREATEDB CREATEROLE), then the
    role-admin step; dropped afterwards with its logins and databases."""
    owner_url = migrated["COGNIS_MIGRATION_DATABASE_URL"]
    admin_url = role_admin_url(owner_url)
    suffix = uuid.uuid4().hex[:8]
    password = uuid.uuid4().hex
    made = Provisioned(
        f"cognis_t_owner_{suffix}",
        f"cognis_t_app_{suffix}",
        f"cognis_t_worker_{suffix}",
        password,
        make_url(owner_url)
        .set(username=f"cognis_t_owner_{suffix}", password=password, database="postgres")
        .render_as_string(hide_password=False),
    )
    admin = await _connect(admin_url, "postgres")
    try:
        await admin.execute(
            f"CREATE ROLE {made.owner} LOGIN CREATEDB CREATEROLE PASSWORD '{password}'"
        )
        await asyncio.to_thread(_role_admin_step, admin_url, made)
        yield made
    finally:
        owned = await admin.fetch(
            "SELECT datname FROM pg_database WHERE datdba = "
            "(SELECT oid FROM pg_roles WHERE rolname = $1)",
            made.owner,
        )
        if owned:  # only their owner (or a superuser) may drop them
            owner = await _connect(made.owner_url)
            try:
                for database in owned:
                    await owner.execute(f'DROP DATABASE "{database["datname"]}" WITH (FORCE)')
            finally:
                await owner.close()
        for role in (made.owner, made.app, made.worker):
            await admin.execute(f"DROP ROLE IF EXISTS {role}")
        await admin.close()


async def test_the_role_admin_step_leaves_no_service_role_with_createrole(
    provisioned: Provisioned,
) -> None:
    owner = await _connect(provisioned.owner_url)
    try:
        with_createrole = await owner.fetchval(
            "SELECT count(*) FROM pg_roles WHERE rolcreaterole AND rolname = ANY($1::text[])",
            [provisioned.owner, provisioned.app, provisioned.worker],
        )
        superusers = await owner.fetchval(
            "SELECT count(*) FROM pg_roles WHERE rolsuper AND rolname = ANY($1::text[])",
            [provisioned.owner, provisioned.app, provisioned.worker],
        )
    finally:
        await owner.close()
    assert (with_createrole, superusers) == (0, 0)


async def test_the_owner_cannot_run_programs_on_the_server(provisioned: Provisioned) -> None:
    owner = await _connect(provisioned.owner_url)
    try:
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await owner.execute(f"GRANT pg_execute_server_program TO {provisioned.owner}")
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await owner.execute(f"ALTER ROLE {provisioned.owner} CREATEROLE")
        await owner.execute("CREATE TEMPORARY TABLE whoami (name text)")
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await owner.execute("COPY whoami FROM PROGRAM 'id -un'")
        assert await owner.fetchval("SELECT count(*) FROM whoami") == 0
    finally:
        await owner.close()


async def test_an_owner_without_createrole_migrates_a_new_database(
    provisioned: Provisioned,
) -> None:
    """Every role the migrations name exists already, and the owner administers the two
    service groups (0007 grants cognis_rw to cognis_background)."""
    database = f"cognis_t_owned_{uuid.uuid4().hex[:8]}"
    owner = await _connect(provisioned.owner_url)
    try:
        await owner.execute(f'CREATE DATABASE "{database}"')
    finally:
        await owner.close()
    url = (
        make_url(provisioned.owner_url)
        .set(drivername="postgresql+asyncpg", database=database)
        .render_as_string(hide_password=False)
    )
    with one_worker_at_a_time("migrations"):
        await asyncio.to_thread(_upgrade_here, url, "head")
    migrated = await _connect(url)
    try:
        assert await migrated.fetchval("SELECT count(*) FROM alembic_version") == 1
        assert await migrated.fetchval("SELECT to_regclass('memories') IS NOT NULL")
    finally:
        await migrated.close()
