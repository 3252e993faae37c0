"""An analyst writes nothing, large objects included (issue 54): `lo_from_bytea` and its kin
would let a read-only analyst fill the disk outside every table and quota. And it reads no
per-table statistics of other tenants' rows. scripts/database-hardening.sql, which
scripts/services.sh runs as the superuser in every database (template1 too, so this worker's
database has it), takes both from PUBLIC; a real bound analyst tries each."""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from tests.db.test_row_security import _new_tenant
from tests.services import login_role

CREATE_LARGE_OBJECT = (
    "SELECT lo_from_bytea(0, 'fill the disk')",
    "SELECT lo_create(0)",
    "SELECT lo_creat(-1)",
    "SELECT lo_import('/etc/hostname')",
)
STATISTICS = (
    "SELECT sum(n_live_tup) FROM pg_stat_user_tables",
    "SELECT sum(n_tup_ins) FROM pg_stat_all_tables",
    "SELECT sum(heap_blks_read) FROM pg_statio_user_tables",
    "SELECT sum(idx_scan) FROM pg_stat_user_indexes",
)


async def _large_objects(owner: AsyncEngine, role: str) -> int:
    async with owner.connect() as connection:
        return await connection.scalar(
            text(
                "SELECT count(*) FROM pg_largeobject_metadata "
                "WHERE lomowner = (SELECT oid FROM pg_roles WHERE rolname = :r)"
            ),
            {"r": role},
        )


@pytest.mark.parametrize("statement", [*CREATE_LARGE_OBJECT, *STATISTICS])
async def test_a_bound_analyst_can_neither_make_large_objects_nor_read_table_statistics(
    migrated: dict[str, str], owner: AsyncEngine, statement: str
) -> None:
    owner_url = migrated["COGNIS_MIGRATION_DATABASE_URL"]
    async with login_role(owner_url, "cognis_analyst") as (role, url):
        async with owner.begin() as connection:
            await connection.execute(
                text("INSERT INTO analyst_tenants (role_name, tenant_id) VALUES (:r, :t)"),
                {"r": role, "t": await _new_tenant(owner)},
            )
        analyst = create_async_engine(url)
        try:
            async with analyst.connect() as connection:
                assert await connection.scalar(text("SELECT 1")) == 1  # it may connect
                with pytest.raises(DBAPIError, match="permission denied"):
                    await connection.execute(text(statement))
        finally:
            await analyst.dispose()
        assert await _large_objects(owner, role) == 0


async def test_the_service_roles_keep_the_statistics(migrated: dict[str, str]) -> None:
    """Monitoring and the service's own checks read them as cognis_rw (the owner too)."""
    for variable in ("COGNIS_DATABASE_URL", "COGNIS_MIGRATION_DATABASE_URL"):
        engine = create_async_engine(migrated[variable])
        try:
            async with engine.connect() as connection:
                for statement in STATISTICS:
                    await connection.execute(text(statement))
        finally:
            await engine.dispose()


def test_the_hardening_names_every_large_object_maker() -> None:
    """The statements above are what scripts/database-hardening.sql revokes, by name."""
    from tests.services import ROOT

    script = (ROOT / "scripts" / "database-hardening.sql").read_text()
    for statement in CREATE_LARGE_OBJECT:
        name = statement.split("(")[0].removeprefix("SELECT ")
        assert f"pg_catalog.{name}(" in script, name
