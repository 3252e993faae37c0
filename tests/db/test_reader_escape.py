"""An analyst tries to leave its tenant (issue 42): a TEMP table shadowing analyst_tenants,
its own search_path, look-alike objects in a schema of its own, and another database of the
same cluster. Each attempt runs as a real login role in cognis_analyst on the real server, and
each would have read tenant B's rows before 0023_path_proof."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from tests.conftest import alembic_async
from tests.db.test_reader_roles import READS, _bind, _fails, _seen
from tests.db.test_row_security import _new_tenant, _seed
from tests.schema_dump import scratch_database
from tests.services import login_role


@pytest.fixture
async def bound_analyst(
    migrated: dict[str, str], owner: AsyncEngine
) -> AsyncIterator[tuple[str, str, uuid.UUID, str]]:
    """A login role bound to tenant A (one row of the user per table) while tenant B holds two:
    its name, URL, tenant B and the user id."""
    tenant_a, tenant_b = await _new_tenant(owner), await _new_tenant(owner)
    user = f"escape-{uuid.uuid4().hex[:8]}"
    await _seed(owner, tenant_a, user)
    for _ in range(2):
        await _seed(owner, tenant_b, user)
    async with login_role(migrated["COGNIS_MIGRATION_DATABASE_URL"], "cognis_analyst") as (
        role,
        url,
    ):
        await _bind(owner, role, tenant_a)
        yield role, url, tenant_b, user


ONE_EACH = {name: 1 for name, _ in READS}


async def test_a_temp_table_cannot_be_made_and_would_not_move_the_analyst(
    owner: AsyncEngine, bound_analyst: tuple[str, str, uuid.UUID, str]
) -> None:
    role, url, tenant_b, user = bound_analyst
    shadow = (
        "CREATE TEMP TABLE analyst_tenants (role_name text, tenant_id uuid)",
        f"INSERT INTO analyst_tenants VALUES (current_user, '{tenant_b}')",  # noqa: S608
        "SET max_parallel_workers_per_gather = 0",
    )
    await _fails(url, shadow[0], "permission denied to create temporary tables")
    # Where a DBA has given the role TEMPORARY after all, the shadow is there and changes
    # nothing: the policies' function is bound to public.analyst_tenants.
    async with owner.connect() as connection:
        database = make_url(url).database
        await connection.execute(text(f'GRANT TEMPORARY ON DATABASE "{database}" TO {role}'))
        await connection.commit()
    assert await _seen(url, user, *shadow) == ONE_EACH
    for path in ("pg_temp, public", "pg_temp, pg_catalog, public", "public, pg_temp"):
        assert await _seen(url, user, *shadow, f"SET search_path = {path}") == ONE_EACH, path


async def test_look_alikes_in_a_schema_of_its_own_change_nothing(
    owner: AsyncEngine, bound_analyst: tuple[str, str, uuid.UUID, str]
) -> None:
    """As if a DBA had given the analyst a sandbox schema: a table, a function and an
    operator named as the ones the policies use, found first on the analyst's search_path."""
    role, url, tenant_b, user = bound_analyst
    sandbox = f"sandbox_{uuid.uuid4().hex[:8]}"
    async with owner.begin() as connection:
        await connection.execute(text(f"CREATE SCHEMA {sandbox}"))
        await connection.execute(text(f"GRANT USAGE, CREATE ON SCHEMA {sandbox} TO {role}"))
    try:
        engine = create_async_engine(url)
        try:
            async with engine.begin() as connection:
                for statement in (
                    f"CREATE TABLE {sandbox}.analyst_tenants (role_name text, tenant_id uuid)",
                    f"INSERT INTO {sandbox}.analyst_tenants VALUES (current_user, '{tenant_b}')",  # noqa: S608
                    f"CREATE FUNCTION {sandbox}.cognis_analyst_tenant() RETURNS uuid "
                    f"LANGUAGE sql AS $$ SELECT '{tenant_b}'::uuid $$",
                    f"CREATE FUNCTION {sandbox}.cognis_tenant() RETURNS uuid "
                    f"LANGUAGE sql AS $$ SELECT '{tenant_b}'::uuid $$",
                    f"CREATE FUNCTION {sandbox}.current_setting(text, boolean) RETURNS text "
                    f"LANGUAGE sql AS $$ SELECT '{tenant_b}' $$",
                    f"CREATE FUNCTION {sandbox}.always(uuid, uuid) RETURNS boolean "
                    "LANGUAGE sql AS $$ SELECT true $$",
                    f"CREATE OPERATOR {sandbox}.= (LEFTARG = uuid, RIGHTARG = uuid, "
                    f"FUNCTION = {sandbox}.always)",
                ):
                    await connection.execute(text(statement))
        finally:
            await engine.dispose()
        for path in (f"{sandbox}, public", f"{sandbox}, pg_catalog, public"):
            seen = await _seen(url, user, f"SET search_path = {path}")
            assert seen == ONE_EACH, path
    finally:
        async with owner.begin() as connection:
            await connection.execute(text(f"DROP SCHEMA {sandbox} CASCADE"))


async def test_an_analyst_of_one_database_cannot_log_into_another(
    migrated: dict[str, str], bound_analyst: tuple[str, str, uuid.UUID, str]
) -> None:
    _, url, _, user = bound_analyst
    assert await _seen(url, user) == ONE_EACH
    async with scratch_database(migrated["COGNIS_MIGRATION_DATABASE_URL"]) as other_url:
        await alembic_async(
            {**migrated, "COGNIS_MIGRATION_DATABASE_URL": other_url}, "upgrade", "head"
        )
        elsewhere = make_url(url).set(database=make_url(other_url).database)
        await _fails(
            elsewhere.render_as_string(hide_password=False),
            "SELECT 1",
            "permission denied for database",
        )
        # The service's roles still connect there, and may stage rows in temporary tables.
        service = make_url(migrated["COGNIS_DATABASE_URL"]).set(
            database=make_url(other_url).database
        )
        engine = create_async_engine(service)
        try:
            async with engine.begin() as connection:
                await connection.execute(text("CREATE TEMP TABLE staged (id int) ON COMMIT DROP"))
        finally:
            await engine.dispose()


async def test_every_function_of_the_schema_is_bound_or_has_a_fixed_path(
    owner: AsyncEngine,
) -> None:
    """A later revision's new function fails here until it is path-proof too."""
    async with owner.connect() as connection:
        loose = (
            await connection.execute(
                text(
                    "SELECT p.oid::regprocedure::text FROM pg_proc p "
                    "WHERE p.pronamespace = 'public'::regnamespace "
                    "AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.objid = p.oid "
                    "                AND d.classid = 'pg_proc'::regclass AND d.deptype = 'e') "
                    "AND p.prosqlbody IS NULL "
                    "AND NOT coalesce(p.proconfig, '{}') @> "
                    "        ARRAY['search_path=pg_catalog, public, pg_temp']"
                )
            )
        ).scalars()
        assert sorted(loose) == []
        # And nobody but the owner may create in the schema or the database's temporary one.
        public_privileges = await connection.scalar(
            text(
                "SELECT has_schema_privilege('public', 'public', 'CREATE') "
                "OR has_database_privilege('public', current_database(), 'TEMPORARY') "
                "OR has_database_privilege('public', current_database(), 'CONNECT')"
            )
        )
        assert public_privileges is False


async def test_the_auditor_sees_every_binding(
    migrated: dict[str, str], bound_analyst: tuple[str, str, uuid.UUID, str]
) -> None:
    role, _, _, _ = bound_analyst
    async with login_role(migrated["COGNIS_MIGRATION_DATABASE_URL"], "cognis_auditor") as (
        _,
        url,
    ):
        engine = create_async_engine(url)
        try:
            async with engine.connect() as connection:
                bound = await connection.scalar(
                    text("SELECT count(*) FROM analyst_tenants WHERE role_name = :r"), {"r": role}
                )
                assert bound == 1
        finally:
            await engine.dispose()
