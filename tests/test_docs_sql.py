"""Docs that are executed: every SQL block of the docs runs against the migrated database,
holding data, as the role the docs say it runs as (`<!-- sql-role: ... -->`, tests/doc_blocks.py).
docs/analysts.md and docs/deployment.md together make and use the analysts' roles; the other
pages' blocks run as the owner in a transaction rolled back after them (an example such as a
new category must not change the other tests' database).

Each block is preceded by `<!-- sql-role: owner|analyst|role-admin -->`. The role admin's
blocks of deployment.md make (and drop) an analyst login role and an auditor, the owner's bind
and list them; the analyst's blocks of analysts.md run
as that analyst (bound to tenant `acme`, where alice's data is). Login roles are cluster-wide,
so their documented names get a suffix of this run's own; nothing else is changed."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from app.db.sqlscript import split_statements
from tests.db.test_row_security import VECTOR_768, _new_tenant, _seed
from tests.doc_blocks import blocks as doc_blocks
from tests.doc_blocks import of_kind
from tests.services import role_admin_url

ROOT = Path(__file__).resolve().parents[1]
ROLE_PAGES = {"docs/analysts.md", "docs/deployment.md"}
OTHER_PAGES = sorted(
    {b.page.relative_to(ROOT).as_posix() for b in of_kind("sql-role")} - ROLE_PAGES
)
DOCUMENTED_PASSWORD = "change-me"
ROLES = ("acme_bi", "audit_jane")
CHAIN_ID = "5a0c8d3e-1f7b-4c5e-9a55-0f0d2a9b7c11"  # the chain the analysts' examples name


def blocks(doc: str) -> list[tuple[str, str]]:
    """The page's `sql-role` blocks, as (role, code); tests/test_docs_inventory.py sees to it
    that every other SQL block says why it is not run."""
    found = doc_blocks(ROOT / "docs" / doc)
    return [(block.argument, block.code) for block in found if block.kind == "sql-role"]


async def _alice(owner: AsyncEngine) -> None:
    """Tenant acme and alice's history in it: Tokyo (2020) updated to Osaka (2023-03), a cat
    (2023-04), and a message with its task, decision, outbox row and idempotency key."""
    async with owner.begin() as connection:
        tenant_id = await connection.scalar(
            text(
                "INSERT INTO tenants (id, name) VALUES (gen_random_uuid(), 'acme') "
                "ON CONFLICT (name) DO UPDATE SET name = excluded.name RETURNING id"
            )
        )
    await _seed(owner, tenant_id, "alice")
    await _seed(owner, await _new_tenant(owner), "alice")
    vector = "[" + ",".join(["0.1"] * 256) + "]"
    insert = (
        "INSERT INTO memories (id, user_id, chain_id, version, replaces_id, content, category,"
        " event_time, embedding_256d, embedding_768d) VALUES (:id, 'alice', :chain, :version,"
        " :replaces, :content, 'hobbies', :event, CAST(:v AS vector), CAST(:w AS vector))"
    )
    second = uuid.uuid4()
    async with owner.begin() as connection:
        await connection.execute(
            text("SELECT set_config('cognis.tenant_id', :t, true)"), {"t": str(tenant_id)}
        )
        for id_, version, replaces, content, event in (
            (CHAIN_ID, 1, None, "I live in Tokyo", datetime(2020, 1, 1, tzinfo=UTC)),
            (uuid.uuid4(), 1, None, "I adopted a cat", datetime(2023, 4, 2, tzinfo=UTC)),
        ):
            chain = id_
            await connection.execute(
                text(insert),
                {
                    "id": id_,
                    "chain": chain,
                    "version": version,
                    "replaces": replaces,
                    "content": content,
                    "event": event,
                    "v": vector,
                    "w": VECTOR_768,
                },
            )
        await connection.execute(
            text(
                "UPDATE memories SET is_current = false, superseded_at = clock_timestamp() "
                "WHERE id = :id"
            ),
            {"id": CHAIN_ID},
        )
        await connection.execute(
            text(insert),
            {
                "id": second,
                "chain": CHAIN_ID,
                "version": 2,
                "replaces": CHAIN_ID,
                "content": "I moved to Osaka",
                "event": datetime(2023, 3, 1, tzinfo=UTC),
                "v": vector,
                "w": VECTOR_768,
            },
        )


async def _run(engine: AsyncEngine, block: str, names: dict[str, str]) -> list[list[tuple]]:
    for documented, own in names.items():
        block = block.replace(documented, own)
    results = []
    async with engine.connect() as connection:
        for statement in split_statements(block):
            result = await connection.exec_driver_sql(statement)
            results.append([tuple(row) for row in result.all()] if result.returns_rows else [])
        await connection.commit()
    return results


async def test_every_documented_sql_block_runs_as_its_role(
    migrated: dict[str, str], owner: AsyncEngine
) -> None:
    await _alice(owner)
    suffix = uuid.uuid4().hex[:8]
    names = {role: f"{role}_{suffix}" for role in ROLES}
    # The documented database is `cognis`; this run's is its own.
    database = make_url(migrated["COGNIS_MIGRATION_DATABASE_URL"]).database
    names["ON DATABASE cognis "] = f'ON DATABASE "{database}" '
    analyst_url = (
        make_url(migrated["COGNIS_MIGRATION_DATABASE_URL"])
        .set(username=names["acme_bi"], password=DOCUMENTED_PASSWORD)
        .render_as_string(hide_password=False)
    )
    analyst = create_async_engine(analyst_url)
    admin = create_async_engine(role_admin_url(migrated["COGNIS_MIGRATION_DATABASE_URL"]))
    deployment = blocks("deployment.md")
    setup, teardown = deployment[:-2], deployment[-2:]
    try:
        for role, block in setup:
            assert role in ("owner", "role-admin"), block
            found = await _run(owner if role == "owner" else admin, block, names)
            if role == "owner":
                readers = found
        # The deployment guide's last query lists the readers it made.
        listed = set(readers[-1])  # other tests' readers may be there too
        assert {(names["acme_bi"], "acme"), (names["audit_jane"], None)} <= listed
        engines = {"owner": owner, "analyst": analyst}
        for role, block in blocks("analysts.md"):
            await _run(engines[role], block, names)
        # What the bitemporal examples say they return.
        async with analyst.connect() as connection:
            # alice's current memories, acme's only: Osaka, the cat, the seed's fact.
            # (another tenant's alice, seeded too, stays out of sight).
            assert (
                await connection.scalar(
                    text("SELECT count(*) FROM current_memories WHERE user_id = 'alice'")
                )
                == 3
            )

            async def contents(sql: str) -> list[str]:
                return list((await connection.execute(text(sql))).scalars())

            assert (
                await contents("SELECT content FROM memories_known_at('alice', '2023-06-01')") == []
            )
            assert await contents(
                "SELECT content FROM memories_true_at('alice', '2021-05-05')"
            ) == ["I live in Tokyo"]
            assert "I moved to Osaka" in await contents(
                "SELECT content FROM memories_true_at('alice', '2024-05-05')"
            )
    finally:
        await analyst.dispose()
        assert [role for role, _ in teardown] == ["owner", "role-admin"]
        await _run(owner, teardown[0][1], names)
        await _run(admin, teardown[1][1], names)
        await admin.dispose()
    async with owner.connect() as connection:
        left = await connection.scalar(
            text("SELECT count(*) FROM pg_roles WHERE rolname = ANY(:n)"),
            {"n": [names[role] for role in ROLES]},
        )
        assert left == 0


@pytest.mark.parametrize("page", OTHER_PAGES)
async def test_a_pages_sql_runs_as_the_owner(
    migrated: dict[str, str], owner: AsyncEngine, page: str
) -> None:
    found = blocks(page.removeprefix("docs/"))
    assert found and {role for role, _ in found} == {"owner"}, page
    async with owner.connect() as connection:
        transaction = await connection.begin()
        try:
            for _, block in found:
                for statement in split_statements(block):
                    await connection.exec_driver_sql(statement)
        finally:
            await transaction.rollback()


def test_the_pages_have_sql_of_both_kinds() -> None:
    assert "docs/ingestion.md" in OTHER_PAGES
