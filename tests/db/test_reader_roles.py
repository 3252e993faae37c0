"""Roles for readers (0016_reader_roles), straight in SQL: what cognis_analyst and
cognis_auditor can and cannot see or do, what a view granted to another role shows, and the
comments that make `\\d+` explain the analysts' objects."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, ProgrammingError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from app.db.sqlscript import SQL_DIR, split_statements
from tests.db.test_row_security import TABLES, _new_tenant, _seed
from tests.services import login_role

# What an analyst reads: (name, rows of the seeded user visible through it).
READS = (
    *((table, f"SELECT count(*) FROM {table} WHERE user_id = :u") for table in TABLES),  # noqa: S608
    ("current_memories", "SELECT count(*) FROM current_memories WHERE user_id = :u"),
    ("memory_versions", "SELECT count(*) FROM memory_versions WHERE user_id = :u"),
    ("memories_known_at", "SELECT count(*) FROM memories_known_at(:u, now())"),
    ("memories_true_at", "SELECT count(*) FROM memories_true_at(:u, now())"),
    ("memories_as_of", "SELECT count(*) FROM memories_as_of(:u, now())"),
)
DDL = "permission denied|must be owner"
ANALYST_TABLES = (*TABLES, "user_erasures", "categories")
ANALYST_VIEWS = ("current_memories", "memory_versions")
ANALYST_FUNCTIONS = (
    "memory_chain(uuid)",
    "memories_as_of(text,timestamptz)",
    "memories_known_at(text,timestamptz)",
    "memories_true_at(text,timestamptz)",
    "cognis_analyst_tenant()",
)


@pytest.fixture
async def two_tenants(owner: AsyncEngine) -> tuple[uuid.UUID, uuid.UUID, str]:
    """Tenants A (one row of the user per table) and B (two), the same user id in both."""
    tenant_a, tenant_b = await _new_tenant(owner), await _new_tenant(owner)
    user = f"reader-{uuid.uuid4().hex[:8]}"
    await _seed(owner, tenant_a, user)
    await _seed(owner, tenant_b, user)
    await _seed(owner, tenant_b, user)
    return tenant_a, tenant_b, user


async def _bind(owner: AsyncEngine, role: str, tenant_id: uuid.UUID) -> None:
    async with owner.begin() as connection:
        await connection.execute(
            text("INSERT INTO analyst_tenants (role_name, tenant_id) VALUES (:r, :t)"),
            {"r": role, "t": tenant_id},
        )


async def _seen(url: str, user: str, *setup: str) -> dict[str, int]:
    engine = create_async_engine(url)
    try:
        async with engine.begin() as connection:
            for statement in setup:
                await connection.execute(text(statement))
            return {name: await connection.scalar(text(sql), {"u": user}) for name, sql in READS}
    finally:
        await engine.dispose()


async def _fails(url: str, statement: str, match: str) -> None:
    engine = create_async_engine(url)
    try:
        with pytest.raises((ProgrammingError, DBAPIError), match=match):
            async with engine.begin() as connection:
                await connection.execute(text(statement))
    finally:
        await engine.dispose()


async def test_an_analyst_reads_its_own_tenant_only_and_cannot_switch(
    migrated: dict[str, str], owner: AsyncEngine, two_tenants: tuple[uuid.UUID, uuid.UUID, str]
) -> None:
    tenant_a, tenant_b, user = two_tenants
    owner_url = migrated["COGNIS_MIGRATION_DATABASE_URL"]
    async with login_role(owner_url, "cognis_analyst") as (role, url):
        # Not bound yet: it cannot even connect (0023 took CONNECT from PUBLIC).
        await _fails(url, "SELECT 1", "permission denied for database")
        await _bind(owner, role, tenant_a)
        seen = await _seen(url, user)
        assert seen == {name: 1 for name, _ in READS}
        # The setting the service's role is confined by does not move an analyst.
        for setup in (
            f"SET cognis.tenant_id = '{tenant_b}'",
            f"SELECT set_config('cognis.tenant_id', '{tenant_b}', false)",
            "SET cognis.tenant_id = ''",
        ):
            assert await _seen(url, user, setup) == seen, setup
        # The bindings: its own only, and not writable.
        engine = create_async_engine(url)
        try:
            async with engine.connect() as connection:
                rows = (
                    await connection.execute(
                        text("SELECT role_name, tenant_id FROM analyst_tenants")
                    )
                ).all()
                assert rows == [(role, tenant_a)]
                tenant_ids = set(
                    (await connection.execute(text("SELECT DISTINCT tenant_id FROM memories")))
                    .scalars()
                    .all()
                )
                assert tenant_ids == {tenant_a}
        finally:
            await engine.dispose()
        for statement, match in (
            (f"UPDATE analyst_tenants SET tenant_id = '{tenant_b}'", "permission denied"),  # noqa: S608
            (f"INSERT INTO analyst_tenants VALUES ('x', '{tenant_b}')", "permission denied"),  # noqa: S608
            ("SELECT count(*) FROM tenants", "permission denied"),
            ("SELECT count(*) FROM api_keys", "permission denied"),
        ):
            await _fails(url, statement, match)


async def test_an_analyst_can_neither_write_nor_change_the_schema(
    migrated: dict[str, str], owner: AsyncEngine, two_tenants: tuple[uuid.UUID, uuid.UUID, str]
) -> None:
    tenant_a, _, user = two_tenants
    async with login_role(migrated["COGNIS_MIGRATION_DATABASE_URL"], "cognis_analyst") as (
        role,
        url,
    ):
        await _bind(owner, role, tenant_a)
        for statement, match in (
            ("UPDATE memories SET content = 'x'", "permission denied"),
            ("DELETE FROM messages", "permission denied"),
            (
                "INSERT INTO messages (user_id, content, sent_at) VALUES ('x', 'y', now())",
                "permission denied",
            ),
            ("CREATE TABLE planted (id int)", DDL),
            ("CREATE VIEW planted AS SELECT 1", DDL),
            ("DROP VIEW current_memories", DDL),
            ("ALTER TABLE memories DISABLE ROW LEVEL SECURITY", DDL),
            ("DROP POLICY memories_analyst_bound ON memories", DDL),
            (
                "CREATE OR REPLACE FUNCTION cognis_analyst_tenant() RETURNS uuid "
                "LANGUAGE sql AS $$ SELECT NULL::uuid $$",
                DDL,
            ),
            ("SET ROLE cognis_auditor", "permission denied"),
            # The service's per-user locks are rows of user_locks (0041_user_locks): an
            # analyst can neither take one nor lock any row the service writes.
            ("SELECT 1 FROM user_locks FOR KEY SHARE", "permission denied"),
            ("SELECT 1 FROM user_locks FOR UPDATE", "permission denied"),
            ("SELECT 1 FROM memories FOR KEY SHARE", "permission denied"),
            ("LOCK TABLE user_locks IN ACCESS SHARE MODE", "permission denied"),
        ):
            await _fails(url, statement, match)
    async with owner.connect() as connection:
        await connection.execute(
            text("SELECT set_config('cognis.tenant_id', :t, false)"), {"t": str(tenant_a)}
        )
        assert (
            await connection.scalar(
                text("SELECT count(*) FROM memories WHERE user_id = :u AND content = 'a fact'"),
                {"u": user},
            )
            == 1
        )


async def test_the_auditor_reads_every_tenant_only_when_granted(
    migrated: dict[str, str], owner: AsyncEngine, two_tenants: tuple[uuid.UUID, uuid.UUID, str]
) -> None:
    _, _, user = two_tenants
    owner_url = migrated["COGNIS_MIGRATION_DATABASE_URL"]
    async with owner.connect() as connection:
        # Nobody is an auditor by the migration's doing: not the owner, not the service's roles.
        members = (
            await connection.execute(
                text(
                    "SELECT rolname FROM pg_roles WHERE rolname IN "
                    "(current_user, 'cognis_rw', 'cognis_background', :app, :worker) "
                    "AND pg_has_role(rolname, 'cognis_auditor', 'MEMBER')"
                ),
                {
                    "app": make_url(migrated["COGNIS_DATABASE_URL"]).username,
                    "worker": make_url(migrated["COGNIS_WORKER_DATABASE_URL"]).username,
                },
            )
        ).all()
        assert members == []
    async with login_role(owner_url) as (_, url):
        await _fails(url, "SELECT count(*) FROM current_memories", "permission denied")
    async with login_role(owner_url, "cognis_auditor") as (_, url):
        assert await _seen(url, user) == {name: 3 for name, _ in READS}
        engine = create_async_engine(url)
        try:
            async with engine.connect() as connection:
                assert await connection.scalar(text("SELECT count(*) FROM tenants")) >= 3
        finally:
            await engine.dispose()
        for statement in ("UPDATE memories SET content = 'x'", "DELETE FROM outbox"):
            await _fails(url, statement, "permission denied")


async def test_a_view_granted_to_another_role_shows_that_roles_rows_only(
    migrated: dict[str, str], owner: AsyncEngine, two_tenants: tuple[uuid.UUID, uuid.UUID, str]
) -> None:
    """security_invoker: the view runs with the reader's own privileges and row-level security,
    never its owner's (a released view would have shown every tenant)."""
    tenant_a, tenant_b, user = two_tenants
    owner_url = migrated["COGNIS_MIGRATION_DATABASE_URL"]
    count = "SELECT count(*) FROM current_memories WHERE user_id = :u"
    # The service's role is not granted the views.
    await _fails(
        migrated["COGNIS_DATABASE_URL"], "SELECT 1 FROM current_memories", "permission denied"
    )
    async with login_role(owner_url) as (role, url):
        async with owner.begin() as connection:
            await connection.execute(text(f"GRANT SELECT ON current_memories TO {role}"))
        # The view alone gives nothing: reading it needs the table too.
        await _fails(url, "SELECT count(*) FROM current_memories", "permission denied for table")
    async with login_role(owner_url, "cognis_rw") as (role, url):
        async with owner.begin() as connection:
            await connection.execute(text(f"GRANT SELECT ON current_memories TO {role}"))
        engine = create_async_engine(url)
        try:
            async with engine.connect() as connection:
                assert await connection.scalar(text(count), {"u": user}) == 0
                for tenant_id, rows in ((tenant_a, 1), (tenant_b, 2)):
                    await connection.execute(
                        text("SELECT set_config('cognis.tenant_id', :t, false)"),
                        {"t": str(tenant_id)},
                    )
                    assert await connection.scalar(text(count), {"u": user}) == rows
                    tenant_ids = set(
                        (await connection.execute(text("SELECT tenant_id FROM current_memories")))
                        .scalars()
                        .all()
                    )
                    assert tenant_ids == {tenant_id}
        finally:
            await engine.dispose()


async def test_every_object_analysts_read_explains_itself(owner: AsyncEngine) -> None:
    async with owner.connect() as connection:
        missing = (
            (
                await connection.execute(
                    text(
                        "SELECT c.relname || coalesce('.' || a.attname, '') FROM pg_class c "
                        "LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 "
                        "AND NOT a.attisdropped "
                        "WHERE c.relnamespace = 'public'::regnamespace AND c.relname = ANY(:names) "
                        "AND obj_description(c.oid, 'pg_class') IS NULL "
                        "UNION ALL "
                        "SELECT c.relname || '.' || a.attname FROM pg_class c "
                        "JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 "
                        "AND NOT a.attisdropped "
                        "WHERE c.relnamespace = 'public'::regnamespace AND c.relname = ANY(:names) "
                        "AND col_description(c.oid, a.attnum) IS NULL"
                    ),
                    {"names": [*ANALYST_TABLES, *ANALYST_VIEWS, "tenants", "analyst_tenants"]},
                )
            )
            .scalars()
            .all()
        )
        assert missing == []
        for function in ANALYST_FUNCTIONS:
            described = await connection.scalar(
                text("SELECT obj_description(CAST(:f AS regprocedure), 'pg_proc')"),
                {"f": function},
            )
            assert described, function


async def test_the_documented_drop_script_leaves_the_bitemporal_functions_working(
    owner: AsyncEngine, two_tenants: tuple[uuid.UUID, uuid.UUID, str]
) -> None:
    """sql/analyst_views_v2_drop.sql, in a transaction rolled back: memories_known_at read
    memories_as_of until 0016, and broke when a DBA removed the views."""
    tenant_a, _, user = two_tenants
    connection = await owner.connect()
    try:
        transaction = await connection.begin()
        for statement in split_statements((SQL_DIR / "analyst_views_v2_drop.sql").read_text()):
            await connection.execute(text(statement))
        await connection.execute(
            text("SELECT set_config('cognis.tenant_id', :t, true)"), {"t": str(tenant_a)}
        )
        gone = await connection.scalar(
            text("SELECT count(*) FROM pg_proc WHERE proname IN ('memories_as_of', 'memory_chain')")
        )
        assert gone == 0
        for function in ("memories_known_at", "memories_true_at"):
            rows = await connection.scalar(
                text(f"SELECT count(*) FROM {function}(:u, now())"),  # noqa: S608
                {"u": user},
            )
            assert rows == 1, function
        await transaction.rollback()
    finally:
        await connection.close()
