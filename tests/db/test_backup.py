"""Backups that restore whole (issue 42): `python -m app backup` dumps a multi-tenant database
as the backup role, checked row for row, and `python -m app restore` brings it back into a new
database where the service's role finds the same memories in the same order. A role that
cannot see every row gets no dump at all, never a partial one that exits 0."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from app.db.backup import counts_path
from tests.conftest import run_cli_async
from tests.db.test_row_security import SET_TENANT, VECTOR_768, _new_tenant, _seed
from tests.services import LOCAL_DIR, _read_env_file

MEMORY_ROWS = "SELECT id, tenant_id, user_id, content, embedding_768d::text FROM memories"


def _backup_url(database: str) -> str:
    """The backup role (made by scripts/services.sh: only a superuser can make a BYPASSRLS
    role), on this worker's database."""
    env_file = LOCAL_DIR / "cognis.env"
    url = os.environ.get("COGNIS_TEST_BACKUP_DATABASE_URL") or (
        _read_env_file(env_file).get("COGNIS_BACKUP_DATABASE_URL") if env_file.exists() else None
    )
    if not url:
        pytest.skip("no backup role: scripts/services.sh makes one (COGNIS_BACKUP_DATABASE_URL)")
    return make_url(url).set(database=database).render_as_string(hide_password=False)


@pytest.fixture
async def tenants(owner: AsyncEngine) -> AsyncIterator[tuple[list[uuid.UUID], str]]:
    """Two tenants, the same user id in both, one with two memories."""
    ids = [await _new_tenant(owner), await _new_tenant(owner)]
    user = f"backup-{uuid.uuid4().hex[:8]}"
    await _seed(owner, ids[0], user)
    await _seed(owner, ids[1], user)
    await _seed(owner, ids[1], user)
    yield ids, user


async def _rows(engine: AsyncEngine, tenant_ids: list[uuid.UUID]) -> list[tuple]:
    """The tenants' memories, each read under its own tenant's row security."""
    rows = []
    for tenant_id in tenant_ids:
        async with engine.begin() as connection:
            await connection.execute(SET_TENANT, {"t": str(tenant_id)})
            result = await connection.execute(text(f"{MEMORY_ROWS} ORDER BY id"))
            rows.extend(tuple(row) for row in result)
    return rows


async def _nearest(url: str, tenant_id: uuid.UUID, user: str) -> list[uuid.UUID]:
    """The vector leg's question, as the service's role under its tenant's row security."""
    engine = create_async_engine(url)
    try:
        async with engine.begin() as connection:
            await connection.execute(SET_TENANT, {"t": str(tenant_id)})
            result = await connection.execute(
                text(
                    "SELECT id FROM memories WHERE user_id = :u AND is_current "
                    "ORDER BY embedding_768d <=> CAST(:v AS vector), id"
                ),
                {"u": user, "v": VECTOR_768},
            )
            return list(result.scalars())
    finally:
        await engine.dispose()


async def backed_up(migrated: dict[str, str], owner: AsyncEngine, folder: Path) -> Path:
    """This worker's database dumped by `python -m app backup` as the backup role (granted
    CONNECT on it first), into `folder`."""
    database = make_url(migrated["COGNIS_MIGRATION_DATABASE_URL"]).database
    async with owner.connect() as connection:
        await connection.execute(text(f'GRANT CONNECT ON DATABASE "{database}" TO cognis_backup'))
        await connection.commit()
    dump = folder / "cognis.dump"
    done = await run_cli_async(
        migrated, "app", "backup", str(dump), "--database-url", _backup_url(database)
    )
    assert done.returncode == 0, done.stderr
    return dump


async def test_a_backup_restores_whole_into_a_new_database(
    migrated: dict[str, str],
    owner: AsyncEngine,
    tenants: tuple[list[uuid.UUID], str],
    tmp_path: Path,
) -> None:
    tenant_ids, user = tenants
    owner_url = migrated["COGNIS_MIGRATION_DATABASE_URL"]
    database = make_url(owner_url).database
    dump = await backed_up(migrated, owner, tmp_path)
    counts = json.loads((tmp_path / "cognis.dump.counts.json").read_text())
    before = await _rows(owner, tenant_ids)
    assert len(before) == 3
    assert counts["memories"] >= 3 and counts["tenants"] >= 3
    assert dump.stat().st_mode & 0o077 == 0  # every user's data: the owner's eyes only

    restored = f"{database}_restored_{uuid.uuid4().hex[:6]}"
    try:
        done = await run_cli_async(migrated, "app", "restore", str(dump), "--into", restored)
        assert done.returncode == 0, done.stderr
        assert "as dumped" in done.stdout
        restored_owner = make_url(owner_url).set(database=restored)
        engine = create_async_engine(restored_owner)
        try:
            assert await _rows(engine, tenant_ids) == before
            async with engine.connect() as connection:
                # Row security, forced on the owner, and the database's privileges came too.
                forced = await connection.scalar(
                    text("SELECT relforcerowsecurity FROM pg_class WHERE relname = 'memories'")
                )
                assert forced is True
                public_connects = await connection.scalar(
                    text("SELECT has_database_privilege('public', current_database(), 'CONNECT')")
                )
                assert public_connects is False
        finally:
            await engine.dispose()
        service = make_url(migrated["COGNIS_DATABASE_URL"])
        for tenant_id in tenant_ids:
            found = await _nearest(
                service.set(database=restored).render_as_string(hide_password=False),
                tenant_id,
                user,
            )
            assert found == await _nearest(
                service.render_as_string(hide_password=False), tenant_id, user
            )
            assert len(found) == (1 if tenant_id == tenant_ids[0] else 2)
        # The next `make backup` of the restored database works: the restore granted the
        # backup role its CONNECT (a dump carries no database privileges).
        again_dump = tmp_path / "restored.dump"
        done = await run_cli_async(
            migrated, "app", "backup", str(again_dump), "--database-url", _backup_url(restored)
        )
        assert done.returncode == 0, done.stderr
        assert json.loads(counts_path(again_dump).read_text()) == counts
        # A restore never lands on data: the same database again is refused.
        again = await run_cli_async(migrated, "app", "restore", str(dump), "--into", restored)
        assert again.returncode == 1
        assert f"database {restored} exists" in again.stderr
    finally:
        async with owner.connect() as connection:
            await connection.execute(text("COMMIT"))
            await connection.execute(text(f'DROP DATABASE IF EXISTS "{restored}" WITH (FORCE)'))


async def test_a_role_that_cannot_see_every_row_gets_no_dump(
    migrated: dict[str, str], tenants: tuple[list[uuid.UUID], str], tmp_path: Path
) -> None:
    """The owner is held to row-level security (FORCE): it would dump some tenants' rows, or
    none, and exit 0. It is refused before pg_dump runs, and leaves no file."""
    dump = tmp_path / "partial.dump"
    done = await run_cli_async(
        migrated,
        "app",
        "backup",
        str(dump),
        "--database-url",
        migrated["COGNIS_MIGRATION_DATABASE_URL"],
    )
    assert done.returncode == 1
    assert "cannot read every row" in done.stderr
    assert not dump.with_name("partial.dump.partial").exists()
    assert not dump.exists()


def test_a_restore_leaves_the_superusers_entries_out() -> None:
    """The catalog's privileges that scripts/database-hardening.sql changed are in every dump
    of a hardened database; as the owner, their REVOKE fails ("permission denied for function
    lo_creat"), so the restore skips them (the new database has them from template1)."""
    from app.db.backup import _superusers_entry

    listing = {
        "3993; 0 0 ACL pg_catalog FUNCTION lo_creat(integer) postgres": True,
        "4013; 0 0 ACL pg_catalog TABLE pg_stat_all_indexes postgres": True,
        "4101; 0 0 COMMENT - EXTENSION vector": True,
        "3991; 0 0 ACL - SCHEMA public pg_database_owner": False,
        "4120; 0 0 ACL public TABLE memories cognis": False,
        "4125; 0 0 ACL public FUNCTION cognis_key_owner(text, text) cognis": False,
    }
    assert {line: _superusers_entry(line) for line in listing} == listing
