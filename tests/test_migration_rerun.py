"""Migrations a DBA can rerun: one database upgraded step by step with data equals one created
at head, and an upgrade interrupted after any statement that commits (or in the middle of a
concurrent index build) and then rerun ends with the same schema as an uninterrupted one.

Schemas are compared whole (tests/schema_dump.py: pg_dump --schema-only, normalised). The
interruptions use migrations/env.py's fault injection: COGNIS_MIGRATION_KILL_AFTER=<n> ends the
migrating process abruptly after its n-th statement, so whatever that statement's transaction
had not committed is lost with the connection, as when a migration is killed. The migrating
process is a fork server's child (tests/migration_process.py), not a new `alembic` command: the
same migrations and env.py, without a Python start and the app's imports per run.
"""

from __future__ import annotations

import ast
import os
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

from app.db.tenant import DEFAULT_TENANT_ID
from tests.conftest import alembic_async, run_cli_async, upgrade_in_process
from tests.migration_process import upgrade_in_child
from tests.schema_dump import (
    database_name,
    first_difference,
    schema_of,
    scratch_database,
    scratch_databases,
)
from tests.test_migration_files import _chain as revision_chain

CHAIN = [script.revision for script in revision_chain()]
# One worker builds the chain of template databases once and runs every test of this file.
pytestmark = pytest.mark.xdist_group("migration_rerun")
# The revisions with steps outside a transaction (concurrent index builds and drops, VALIDATE
# apart): the only ones a kill can leave half done. Each has what a fresh clone's test needs.
PARTIAL = (
    "0003_ingestion",
    "0004_outbox_user_pending",
    "0005_write_path",
    "0006_memory_external_ids",
    "0007_tenants",
    "0010_memory_context",
    "0012_categories",
    "0013_outbox_user_delivered",
    "0017_memory_expiry",
    "0018_agents_runs",
    "0020_user_current_covering",
    "0021_sentence_vectors",
    "0024_source_message_index",
    "0025_current_hnsw",
    "0026_retention",
    "0028_memory_language",
    "0034_multilingual_vector",
    "0036_webhook_dispatch",
    "0037_tenant_indexes",
    "0039_entities",
    "0040_lookup_indexes",
)
# Their first concurrent index build, and the table a transaction holding an old snapshot
# keeps it waiting on (so that the build fails on lock_timeout, its index left INVALID).
FIRST_BUILD = {
    "0003_ingestion": "messages_user_idempotency_key_idx",
    "0004_outbox_user_pending": "outbox_user_pending_idx",
    "0006_memory_external_ids": "memories_user_external_id_idx",
    "0007_tenants": "messages_user_idempotency_key_idx_tenant",
    "0010_memory_context": "memories_user_follows_chain_id_idx",
    "0013_outbox_user_delivered": "outbox_user_delivered_idx",
    "0017_memory_expiry": "memories_expires_at_idx",
    "0018_agents_runs": "memories_user_agent_id_idx",
    "0020_user_current_covering": "memories_user_current_tenant_idx",
}


def _env(base: dict[str, str], url: str) -> dict[str, str]:
    return {**base, "COGNIS_MIGRATION_DATABASE_URL": url}


async def _insert_rows(url: str, revision: str, n: int) -> None:
    """Rows of what the schema at `revision` holds: a message, a memory chain of two versions
    (one superseded), its outbox rows; with external ids, idempotency keys and custom
    categories from the revisions that bring them."""
    engine = create_async_engine(url)
    index = CHAIN.index(revision)
    at_least = {name: index >= CHAIN.index(name) for name in CHAIN}
    vec = "array_fill(0.1::real, ARRAY[{}])::vector"
    try:
        async with engine.begin() as connection:
            # The tenant of these rows (a plain setting before 0007_tenants).
            await connection.execute(
                text("SELECT set_config('cognis.tenant_id', :t, true)"),
                {"t": str(DEFAULT_TENANT_ID)},
            )
            key = ", idempotency_key" if at_least["0003_ingestion"] else ""
            key_value = f", 'key-{n}'" if key else ""
            await connection.execute(
                text(
                    f"INSERT INTO messages (id, user_id, content, sent_at{key}) VALUES "  # noqa: S608 (constants)
                    f"(gen_random_uuid(), 'u{n}', 'hello', now(){key_value})"
                )
            )
            category = "travel"
            if at_least["0012_categories"]:
                category = f"custom_{n}"
                await connection.execute(
                    text("INSERT INTO categories (name, description) VALUES (:c, 'test')"),
                    {"c": category},
                )
            external = ", external_id" if at_least["0006_memory_external_ids"] else ""
            external_value = f", 'ext-{n}'" if external else ""
            first = (
                await connection.execute(
                    text(
                        "INSERT INTO memories (id, user_id, chain_id, version, content, category,"  # noqa: S608 (constants)
                        f" is_current, superseded_at, embedding_768d, embedding_256d{external})"
                        f" VALUES (gen_random_uuid(), 'u{n}', gen_random_uuid(), 1, 'v1',"
                        f" :c, false, now(), {vec.format(768)}, {vec.format(256)}"
                        f"{external_value}) RETURNING id, chain_id"
                    ),
                    {"c": category},
                )
            ).one()
            await connection.execute(
                text(
                    "INSERT INTO memories (id, user_id, chain_id, version, content, category,"  # noqa: S608 (constants)
                    " replaces_id, embedding_768d, embedding_256d) VALUES (gen_random_uuid(),"
                    f" :u, :chain, 2, 'v2', :c, :first, {vec.format(768)}, {vec.format(256)})"
                ),
                {"u": f"u{n}", "chain": first.chain_id, "c": category, "first": first.id},
            )
            await connection.execute(
                text("INSERT INTO outbox (user_id, op, memory_id) VALUES (:u, 'index', :m)"),
                {"u": f"u{n}", "m": first.id},
            )
    finally:
        await engine.dispose()


@pytest.fixture(scope="module")
async def stepped(migrated: dict[str, str]) -> AsyncIterator[dict[str, str]]:
    """One database upgraded revision by revision from base, rows inserted after each step, and
    a copy of it at each revision the interruption tests start from or compare with (template
    databases): revision -> database name. The last entry, "head", is that database itself."""
    interrupted = {*PARTIAL, *FIRST_BUILD}
    kept = interrupted | {CHAIN[CHAIN.index(revision) - 1] for revision in interrupted}
    async with scratch_databases(migrated["COGNIS_MIGRATION_DATABASE_URL"]) as make:
        url = await make(None)
        copies: dict[str, str] = {}
        for n, revision in enumerate(CHAIN):
            await upgrade_in_process(url, revision)
            await _insert_rows(url, revision, n)
            if revision in kept:
                copies[revision] = database_name(await make(database_name(url)))
        copies["head"] = database_name(url)
        yield copies


def _url(migrated: dict[str, str], database: str) -> str:
    owner = make_url(migrated["COGNIS_MIGRATION_DATABASE_URL"])
    return owner.set(database=database).render_as_string(hide_password=False)


async def test_a_database_upgraded_step_by_step_with_data_equals_one_created_at_head(
    migrated: dict[str, str], stepped: dict[str, str]
) -> None:
    owner = migrated["COGNIS_MIGRATION_DATABASE_URL"]
    async with scratch_database(owner) as fresh:
        await alembic_async(_env(migrated, fresh), "upgrade", "head")  # the command a DBA runs
        expected = await schema_of(fresh)
    actual = await schema_of(_url(migrated, stepped["head"]))
    assert "CREATE FUNCTION public.memories_known_at" in expected
    assert "CREATE POLICY memories_tenant_isolation" in expected
    assert "GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE public.memories TO cognis_rw" in expected
    assert actual == expected, first_difference(expected, actual)


async def _version(url: str) -> str:
    engine = create_async_engine(url)
    try:
        async with engine.connect() as connection:
            version = await connection.execute(text("SELECT version_num FROM alembic_version"))
            return str(version.scalar_one())
    finally:
        await engine.dispose()


async def _invalid_indexes(url: str) -> list[str]:
    engine = create_async_engine(url)
    try:
        async with engine.connect() as connection:
            found = await connection.execute(
                text("SELECT indexrelid::regclass::text FROM pg_index WHERE NOT indisvalid")
            )
            return list(found.scalars())
    finally:
        await engine.dispose()


def _kill_points(trace: Path) -> list[int]:
    """The statements after which a kill leaves a state of its own: each that committed by
    itself (outside a transaction) and the last of each transaction before it committed. A
    kill after any other statement loses its transaction, the same as a kill after the commit
    before it. Checks (SELECT) and the revision's own final commit (its version stamp) add no
    state of their own: killing there repeats an earlier case."""
    lines = [line.split("\t") for line in trace.read_text().splitlines()]
    statements = {int(parts[0]): parts for parts in lines if len(parts) == 3}
    points = []
    for number, (_, mode, statement) in sorted(statements.items()):
        committed = mode == "autocommit" or [str(number), "commit"] in lines
        if committed and not statement.startswith(("SELECT", "SET", "UPDATE alembic_version")):
            points.append(number)
    return points


@pytest.mark.parametrize("revision", PARTIAL)
async def test_an_upgrade_killed_after_any_statement_reruns_to_the_same_schema(
    migrated: dict[str, str], stepped: dict[str, str], revision: str
) -> None:
    owner = migrated["COGNIS_MIGRATION_DATABASE_URL"]
    template = stepped[CHAIN[CHAIN.index(revision) - 1]]
    expected = await schema_of(_url(migrated, stepped[revision]))
    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "trace"
        async with scratch_database(owner, template) as traced:
            assert await upgrade_in_child(traced, revision, COGNIS_MIGRATION_TRACE=str(trace)) == 0
        points = _kill_points(trace)
    assert points, trace.name
    async with scratch_databases(owner) as make:
        for point in points:
            killed = await make(template)
            status = await upgrade_in_child(
                killed, revision, COGNIS_MIGRATION_KILL_AFTER=str(point)
            )
            assert status == 75, point  # the child's traceback, if any, is in the captured stderr
            assert await _version(killed) == CHAIN[CHAIN.index(revision) - 1], point
            await upgrade_in_process(killed, revision)
            actual = await schema_of(killed)
            assert actual == expected, (point, first_difference(expected, actual))


@pytest.mark.parametrize("revision", sorted(FIRST_BUILD))
async def test_a_concurrent_build_interrupted_midway_is_rebuilt_by_the_rerun(
    migrated: dict[str, str], stepped: dict[str, str], revision: str
) -> None:
    """A build that fails (here: its concurrent_lock_timeout while it waits for a transaction
    with an older snapshot, as a statement_timeout or a cancel would) leaves an INVALID index
    behind, which `CREATE INDEX CONCURRENTLY IF NOT EXISTS` alone would keep for good."""
    owner = migrated["COGNIS_MIGRATION_DATABASE_URL"]
    template = stepped[CHAIN[CHAIN.index(revision) - 1]]
    index = FIRST_BUILD[revision]
    expected = await schema_of(_url(migrated, stepped[revision]))
    async with scratch_database(owner, template) as broken:
        engine = create_async_engine(broken, isolation_level="REPEATABLE READ")
        try:
            async with engine.connect() as old_snapshot:
                await old_snapshot.execute(text("SELECT 1"))  # takes the snapshot, locks nothing
                failed = await run_cli_async(
                    _env(migrated, broken),
                    "alembic",
                    "-x",
                    "concurrent_lock_timeout=1s",  # builds wait 5 min by default
                    "-x",
                    "lock_retry_s=0",  # and a failed one is not tried again
                    "upgrade",
                    revision,
                )
                assert failed.returncode != 0
                assert "waited longer than concurrent_lock_timeout (1s)" in failed.stderr, (
                    failed.stderr[-2000:]
                )
                await old_snapshot.rollback()
            async with engine.connect() as connection:
                valid = await connection.execute(
                    text("SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass(:i)"),
                    {"i": index},
                )
                assert valid.scalar_one() is False
        finally:
            await engine.dispose()
        await upgrade_in_process(broken, revision)
        actual = await schema_of(broken)
        assert actual == expected, first_difference(expected, actual)
        assert await _invalid_indexes(broken) == []


def test_the_kill_hook_is_off_unless_asked() -> None:
    assert not {"COGNIS_MIGRATION_KILL_AFTER", "COGNIS_MIGRATION_TRACE"} & set(os.environ)


# autocommit_block, and the helpers of app/db/migration_safety.py that run in one.
OUTSIDE_A_TRANSACTION = {
    "autocommit_block",
    "create_index_concurrently",
    "drop_index_concurrently",
    "validate_constraint",
}


def _steps_outside_a_transaction(path: str) -> bool:
    """Whether the revision's upgrade (or a helper of its module other than `downgrade`) runs
    a statement outside a transaction: the calls above, by name."""
    tree = ast.parse(Path(path).read_text())
    for function in ast.walk(tree):
        if not isinstance(function, ast.FunctionDef) or function.name == "downgrade":
            continue
        for node in ast.walk(function):
            if isinstance(node, ast.Call):
                called = node.func
                name = (
                    called.attr if isinstance(called, ast.Attribute) else getattr(called, "id", "")
                )
                if name in OUTSIDE_A_TRANSACTION:
                    return True
    return False


def test_every_revision_with_steps_outside_a_transaction_is_killed_mid_way() -> None:
    """A new revision that builds an index concurrently joins PARTIAL, or its kill cases go
    untested."""
    outside = {
        script.revision
        for script in revision_chain()
        if script.path and _steps_outside_a_transaction(script.path)
    }
    assert "0039_entities" in outside  # the check finds what it looks for
    assert outside == set(PARTIAL)
