"""Row-level security, straight in SQL: the service's roles see only the rows of the tenant
set for the transaction, even with no WHERE at all, and cannot lift the rule."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError, ProgrammingError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

TABLES = (
    "messages",
    "memories",
    "outbox",
    "ingest_tasks",
    "ingest_decisions",
    "idempotency_keys",
)
VECTOR_768 = "[" + ",".join(["0.1"] * 768) + "]"
VECTOR_256 = "[" + ",".join(["0.1"] * 256) + "]"
SET_TENANT = text("SELECT set_config('cognis.tenant_id', :t, true)")


async def _seed(owner: AsyncEngine, tenant_id: uuid.UUID, user_id: str) -> None:
    """One row in every tenant table, written as the tenant (tenant_id comes from the default).
    The ingestion task is finished and the outbox event delivered: the background workers of
    the session's APIs (same database) take neither, so no row changes while a test reads."""
    message_id, memory_id, job_id = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    params = {
        "m": message_id,
        "mem": memory_id,
        "j": job_id,
        "u": user_id,
        "e768": VECTOR_768,
        "e256": VECTOR_256,
        "k": str(message_id),
    }
    async with owner.begin() as connection:
        await connection.execute(SET_TENANT, {"t": str(tenant_id)})
        for statement in (
            "INSERT INTO messages (id, user_id, content, sent_at) VALUES (:m, :u, 'hi', now())",
            "INSERT INTO memories (id, user_id, chain_id, version, content, category,"
            " embedding_768d, embedding_256d) VALUES (:mem, :u, :mem, 1, 'a fact', 'hobbies',"
            " CAST(:e768 AS vector), CAST(:e256 AS vector))",
            "INSERT INTO outbox (user_id, op, memory_id, processed_at)"
            " VALUES (:u, 'index', :mem, now())",
            "INSERT INTO ingest_tasks (message_id, job_id, user_id, sent_at, state, finished_at)"
            " VALUES (:m, :j, :u, now(), 'done', now())",
            "INSERT INTO ingest_decisions (job_id, message_id, user_id, position, operation,"
            " extractor) VALUES (:j, :m, :u, 0, 'NONE', 'deterministic')",
            "INSERT INTO idempotency_keys (user_id, key, route, request_hash, state, expires_at)"
            " VALUES (:u, :k, 'POST /v1/users/{user_id}/messages', decode('00', 'hex'),"
            " 'running', now() + interval '1 day')",
        ):
            await connection.execute(text(statement), params)


async def _counts(engine: AsyncEngine, tenant_id: uuid.UUID | None, user_id: str) -> dict:
    """Rows of `user_id` per table, seen with no WHERE on the tenant."""
    async with engine.begin() as connection:
        if tenant_id is not None:
            await connection.execute(SET_TENANT, {"t": str(tenant_id)})
        return {
            table: await connection.scalar(
                text(f"SELECT count(*) FROM {table} WHERE user_id = :u"),  # noqa: S608
                {"u": user_id},
            )
            for table in TABLES
        }


async def _new_tenant(owner: AsyncEngine) -> uuid.UUID:
    tenant_id = uuid.uuid4()
    async with owner.begin() as connection:
        await connection.execute(
            text("INSERT INTO tenants (id, name) VALUES (:id, :name)"),
            {"id": tenant_id, "name": f"rls-{tenant_id.hex[:8]}"},
        )
    return tenant_id


@pytest.fixture
async def roles(migrated: dict[str, str]):
    engines = {
        name: create_async_engine(migrated[variable])
        for name, variable in (
            ("owner", "COGNIS_MIGRATION_DATABASE_URL"),
            ("app", "COGNIS_DATABASE_URL"),
            ("worker", "COGNIS_WORKER_DATABASE_URL"),
        )
    }
    yield engines
    for engine in engines.values():
        await engine.dispose()


async def test_app_role_sees_only_its_tenant_without_any_where(roles) -> None:
    owner, app, worker = roles["owner"], roles["app"], roles["worker"]
    tenant_a, tenant_b = await _new_tenant(owner), await _new_tenant(owner)
    user = f"rls-{uuid.uuid4().hex[:8]}"  # the same user id in both tenants
    await _seed(owner, tenant_a, user)
    await _seed(owner, tenant_b, user)
    await _seed(owner, tenant_b, user)
    one = dict.fromkeys(TABLES, 1)

    assert await _counts(app, tenant_a, user) == one
    assert await _counts(app, tenant_b, user) == dict.fromkeys(TABLES, 2)
    # No tenant set: the app role sees nothing at all, not even counting every user.
    assert await _counts(app, None, user) == dict.fromkeys(TABLES, 0)
    async with app.begin() as connection:
        await connection.execute(SET_TENANT, {"t": str(tenant_a)})
        for table in TABLES:
            other = await connection.scalar(
                text(f"SELECT count(*) FROM {table} WHERE tenant_id = :b"),  # noqa: S608
                {"b": tenant_b},
            )
            assert other == 0, table
        # A forgotten WHERE on a write stays in the tenant too.
        changed = await connection.execute(text("UPDATE memories SET content = 'overwritten'"))
        assert changed.rowcount >= 1  # type: ignore[attr-defined]
    assert await _counts(app, tenant_a, user) == one
    async with owner.begin() as connection:
        await connection.execute(SET_TENANT, {"t": str(tenant_b)})
        contents = (
            await connection.scalars(
                text("SELECT content FROM memories WHERE user_id = :u"), {"u": user}
            )
        ).all()
    assert contents == ["a fact", "a fact"]

    # The background role claims across tenants only while no tenant is set.
    assert await _counts(worker, None, user) == dict.fromkeys(TABLES, 3)
    assert await _counts(worker, tenant_a, user) == one


async def test_app_role_cannot_write_into_or_unlock_another_tenant(roles) -> None:
    owner, app = roles["owner"], roles["app"]
    tenant_a, tenant_b = await _new_tenant(owner), await _new_tenant(owner)
    with pytest.raises(DBAPIError, match="row-level security"):
        async with app.begin() as connection:
            await connection.execute(SET_TENANT, {"t": str(tenant_a)})
            await connection.execute(
                text(
                    "INSERT INTO messages (user_id, content, sent_at, tenant_id)"
                    " VALUES ('x', 'planted', now(), :b)"
                ),
                {"b": tenant_b},
            )
    # With no tenant, a row cannot be written at all.
    with pytest.raises(DBAPIError, match="row-level security"):
        async with app.begin() as connection:
            await connection.execute(
                text("INSERT INTO messages (user_id, content, sent_at) VALUES ('x', 'y', now())")
            )
    # The app role is no owner: it cannot switch the policies off.
    for statement in (
        "ALTER TABLE memories NO FORCE ROW LEVEL SECURITY",
        "ALTER TABLE memories DISABLE ROW LEVEL SECURITY",
        "DROP POLICY memories_tenant_isolation ON memories",
    ):
        with pytest.raises(ProgrammingError, match="must be owner"):
            async with app.begin() as connection:
                await connection.execute(text(statement))
