"""`tenants` and `api_keys` under row-level security (0042, issue 53): the request role sees its
own tenant's row and key rows only, writes neither table, and finds a key's tenant through
`cognis_key_owner`, which answers for the one key presented. The worker role with no tenant
set (the admin API and CLI) sees every tenant's. Straight in SQL, as the real roles."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from app.tenants.keys import generate_key
from tests.db.test_row_security import SET_TENANT, _new_tenant
from tests.services import login_role

KEY_OWNER = text("SELECT tenant_id FROM cognis_key_owner(:prefix, :hash)")


@pytest.fixture
async def keyed(owner: AsyncEngine) -> AsyncIterator[dict[uuid.UUID, tuple[str, str]]]:
    """Two tenants with a key each: tenant -> (prefix, key hash)."""
    made = {}
    for _ in range(2):
        tenant_id, key = await _new_tenant(owner), generate_key()
        async with owner.begin() as connection:
            await connection.execute(
                text(
                    "INSERT INTO api_keys (id, tenant_id, prefix, key_hash) "
                    "VALUES (gen_random_uuid(), :t, :p, :h)"
                ),
                {"t": tenant_id, "p": key.prefix, "h": key.key_hash},
            )
        made[tenant_id] = (key.prefix, key.key_hash)
    yield made
    async with owner.begin() as connection:
        await connection.execute(
            text("DELETE FROM tenants WHERE id = ANY(:ids)"), {"ids": list(made)}
        )


@pytest.fixture
async def app_role(migrated: dict[str, str]) -> AsyncIterator[AsyncEngine]:
    engine = create_async_engine(migrated["COGNIS_DATABASE_URL"])
    yield engine
    await engine.dispose()


async def _scalar(engine: AsyncEngine, tenant_id: uuid.UUID | None, sql: str, **params) -> object:
    async with engine.begin() as connection:
        if tenant_id is not None:
            await connection.execute(SET_TENANT, {"t": str(tenant_id)})
        return await connection.scalar(text(sql), params)


async def test_the_request_role_reads_no_other_tenants_key_or_tenant_row(
    app_role: AsyncEngine, keyed: dict[uuid.UUID, tuple[str, str]]
) -> None:
    mine, other = list(keyed)
    other_prefix = keyed[other][0]
    seen = {
        "other's key by prefix": await _scalar(
            app_role, mine, "SELECT count(*) FROM api_keys WHERE prefix = :p", p=other_prefix
        ),
        "other's keys by tenant": await _scalar(
            app_role, mine, "SELECT count(*) FROM api_keys WHERE tenant_id = :t", t=other
        ),
        "other's tenant row": await _scalar(
            app_role, mine, "SELECT count(*) FROM tenants WHERE id = :t", t=other
        ),
        "any key with no tenant set": await _scalar(
            app_role, None, "SELECT count(*) FROM api_keys"
        ),
        "any tenant with no tenant set": await _scalar(
            app_role, None, "SELECT count(*) FROM tenants"
        ),
    }
    assert seen == dict.fromkeys(seen, 0)
    # Its own rows, as the tenant's transaction sets them.
    assert await _scalar(app_role, mine, "SELECT count(*) FROM api_keys") == 1
    assert await _scalar(app_role, mine, "SELECT count(*) FROM tenants") == 1


@pytest.mark.parametrize(
    "statement",
    [
        "INSERT INTO api_keys (id, tenant_id, prefix, key_hash) "
        "VALUES (gen_random_uuid(), :t, 'forged000000', 'x')",
        "UPDATE api_keys SET revoked_at = now() WHERE tenant_id = :t",
        "DELETE FROM api_keys WHERE tenant_id = :t",
        "INSERT INTO tenants (id, name) VALUES (gen_random_uuid(), 'forged-' || :t)",
        "DELETE FROM tenants WHERE id = :t",
    ],
)
async def test_the_request_role_writes_neither_table(
    app_role: AsyncEngine, keyed: dict[uuid.UUID, tuple[str, str]], statement: str
) -> None:
    """Not even its own tenant's rows (a compromised request process would revoke its keys or
    delete its tenant): the admin API and CLI run as the worker role."""
    mine = next(iter(keyed))
    with pytest.raises(DBAPIError, match="permission denied"):
        await _scalar(app_role, mine, statement, t=str(mine))


async def test_the_key_check_finds_only_the_presented_key(
    app_role: AsyncEngine, keyed: dict[uuid.UUID, tuple[str, str]]
) -> None:
    for tenant_id, (prefix, key_hash) in keyed.items():
        assert await _scalar(app_role, None, KEY_OWNER.text, prefix=prefix, hash=key_hash) == (
            tenant_id
        )
        assert await _scalar(app_role, None, KEY_OWNER.text, prefix=prefix, hash="0" * 64) is None


async def test_the_worker_role_with_no_tenant_administers_every_tenant(
    migrated: dict[str, str], keyed: dict[uuid.UUID, tuple[str, str]]
) -> None:
    worker = create_async_engine(migrated["COGNIS_WORKER_DATABASE_URL"])
    try:
        assert await _scalar(
            worker, None, "SELECT count(*) FROM api_keys WHERE tenant_id = ANY(:t)", t=list(keyed)
        ) == len(keyed)
    finally:
        await worker.dispose()


async def test_readers_cannot_call_the_key_functions(
    migrated: dict[str, str], keyed: dict[uuid.UUID, tuple[str, str]]
) -> None:
    prefix, key_hash = next(iter(keyed.values()))
    async with login_role(migrated["COGNIS_MIGRATION_DATABASE_URL"], "cognis_auditor") as (_, url):
        engine = create_async_engine(url)
        try:
            with pytest.raises(DBAPIError, match="permission denied"):
                await _scalar(engine, None, KEY_OWNER.text, prefix=prefix, hash=key_hash)
        finally:
            await engine.dispose()
