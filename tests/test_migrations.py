"""Migrations: upgrade -> downgrade -> upgrade on real, scratch databases.

Every test here migrates a database of its own, created for it and dropped after it: no API,
relay or ingestion worker is attached to it, so nothing but the test itself holds a lock there
(a worker's claim frozen mid-transaction on the shared database once made a downgrade wait out
its lock_timeout). Commands run as asyncio subprocesses, so the session's loop never blocks.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from app.db.migration_safety import refuses_first
from tests.conftest import ROOT, alembic_async, run_cli, run_cli_async, upgrade_in_process
from tests.schema_dump import scratch_database

EXPECTED_INDEXES = {
    # 0040: an analyst's chain history, and the foreign key a category rename cascades through.
    "ingest_decisions_memory_id_idx": ("btree", "(memory_id)"),
    "memories_category_idx": ("btree", "(category)"),
    "memories_embedding_256d_hnsw_idx": (
        "hnsw",
        "vector_cosine_ops",
        "m='16'",
        "ef_construction='128'",
        "WHERE is_current",  # 0025: current versions only
    ),
    "memories_user_current_tenant_idx": (
        "btree",
        "(user_id) INCLUDE (tenant_id)",
        "WHERE is_current",
    ),
    "memories_replaces_id_idx": ("UNIQUE", "WHERE (replaces_id IS NOT NULL)"),
    "memories_chain_current_idx": ("UNIQUE", "WHERE is_current"),
    "outbox_pending_idx": ("WHERE (processed_at IS NULL)",),
    "outbox_user_pending_idx": ("(user_id, id)", "WHERE (processed_at IS NULL)"),
    "outbox_user_delivered_idx": ("(user_id, processed_at)", "WHERE (processed_at IS NOT NULL)"),
    "memories_user_external_id_idx": (
        "UNIQUE",
        "(tenant_id, user_id, external_id)",
        "(external_id IS NOT NULL)",
        "(version = 1)",
    ),
    "messages_user_idempotency_key_idx": ("UNIQUE", "(tenant_id, user_id, idempotency_key)"),
    # 0037: an analyst's whole-tenant queries read its tenant's rows only.
    "memories_tenant_id_user_id_created_at_idx": ("btree", "(tenant_id, user_id, created_at)"),
    "ingest_decisions_tenant_id_user_id_created_at_idx": (
        "btree",
        "(tenant_id, user_id, created_at)",
    ),
}


async def _schema(url: str) -> tuple[set[str], dict[str, str], set[str]]:
    engine = create_async_engine(url)
    try:
        async with engine.connect() as connection:
            tables = set(
                (
                    await connection.execute(
                        text("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
                    )
                ).scalars()
            )
            indexes = dict(
                (
                    await connection.execute(
                        text(
                            "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public'"
                        )
                    )
                ).all()
            )
            routines = set(
                (
                    await connection.execute(
                        text(
                            "SELECT routine_name FROM information_schema.routines "
                            "WHERE routine_schema = 'public'"
                        )
                    )
                ).scalars()
            )
            routines |= set(
                (
                    await connection.execute(
                        text("SELECT viewname FROM pg_views WHERE schemaname = 'public'")
                    )
                ).scalars()
            )
            return tables, indexes, routines
    finally:
        await engine.dispose()


@dataclass(frozen=True)
class Scratch:
    """An empty database of one test's own: its owner URL and the environment to migrate it."""

    url: str
    env: dict[str, str]


@pytest.fixture
async def scratch(migrated: dict[str, str]) -> AsyncIterator[Scratch]:
    async with scratch_database(migrated["COGNIS_MIGRATION_DATABASE_URL"]) as scratch_url:
        yield Scratch(scratch_url, {**migrated, "COGNIS_MIGRATION_DATABASE_URL": scratch_url})


@pytest.fixture
async def scratch_at_head(scratch: Scratch) -> AsyncIterator[AsyncEngine]:
    """The scratch database migrated to head, and an owner's engine on it."""
    await upgrade_in_process(scratch.url, "head")
    engine = create_async_engine(scratch.url)
    yield engine
    await engine.dispose()


async def test_upgrade_downgrade_upgrade_round_trip(scratch: Scratch) -> None:
    env, scratch_url = scratch.env, scratch.url
    await alembic_async(env, "upgrade", "head")
    tables, indexes, routines = await _schema(scratch_url)
    assert {"memories", "messages", "outbox", "alembic_version"} <= tables
    for name, fragments in EXPECTED_INDEXES.items():
        for fragment in fragments:
            assert fragment in indexes[name], (name, indexes[name])
    assert {
        "current_memories",
        "memory_versions",
        "memory_chain",
        "memories_as_of",
        "memories_known_at",
        "memories_true_at",
    } <= routines
    # 0005 dropped the 768D HNSW index (no query searches it); one step down brings it back.
    assert "memories_embedding_768d_hnsw_idx" not in indexes
    assert {"tenants", "api_keys", "idempotency_keys"} <= tables
    # Before tenants, user ids were unique in the whole deployment (a forced downgrade: it
    # drops every other tenant's rows).
    await alembic_async(env, "-x", "force=true", "downgrade", "0006_memory_external_ids")
    tables, indexes, _ = await _schema(scratch_url)
    assert "tenants" not in tables
    assert "(user_id, external_id)" in indexes["memories_user_external_id_idx"]
    await alembic_async(env, "-x", "force=true", "downgrade", "0004_outbox_user_pending")
    _, indexes, _ = await _schema(scratch_url)
    assert "ef_construction='256'" in indexes["memories_embedding_768d_hnsw_idx"]
    await alembic_async(env, "upgrade", "head")

    await alembic_async(env, "-x", "force=true", "downgrade", "base")
    tables, indexes, routines = await _schema(scratch_url)
    assert tables == {"alembic_version"}
    assert not {"memory_chain", "memories_as_of", "current_memories"} & routines

    await alembic_async(env, "upgrade", "head")
    tables, _, routines = await _schema(scratch_url)
    assert {"memories", "messages", "outbox"} <= tables
    assert "memory_chain" in routines

    # The models and the migrations describe the same schema.
    check = await alembic_async(env, "check")
    assert "No new upgrade operations detected" in check.stdout + check.stderr


def _refusing(target: str) -> list[str]:
    """The revisions a downgrade to `target` takes down whose downgrade refuses first
    (refuse_data_loss), highest first."""
    config = Config(str(ROOT / "alembic.ini"))
    config.set_main_option("script_location", str(ROOT / "migrations"))
    scripts = ScriptDirectory.from_config(config)
    below = (
        set()
        if target == "base"
        else {s.revision for s in scripts.iterate_revisions(target, "base")}
    )
    return [
        script.revision
        for script in scripts.walk_revisions()
        if script.revision not in below and refuses_first(str(script.path))
    ]


async def _version(db: AsyncEngine) -> str:
    async with db.connect() as connection:
        return (
            await connection.execute(text("SELECT version_num FROM alembic_version"))
        ).scalar_one()


async def test_a_downgrade_that_drops_data_refuses_unless_forced(
    scratch: Scratch, scratch_at_head: AsyncEngine
) -> None:
    """The audit trail (0003) must not go because someone typed `downgrade 0002`; and the
    refusal names every revision on the way that would lose data, before any of them ran."""
    env, db = scratch.env, scratch_at_head
    head = await _version(db)
    for target in ("0005_write_path", "0002_analyst_views", "base"):
        refused = await run_cli_async(env, "alembic", "downgrade", target)
        assert refused.returncode != 0, target
        # One line, no traceback: every refusing revision, what, the row counts, the command.
        assert "Traceback" not in refused.stderr, refused.stderr[-2000:]
        (line,) = [ln for ln in refused.stdout.splitlines() if ln.startswith("FAILED:")]
        names = _refusing(target)
        assert {"0022_batch_jobs", "0012_categories", "0006_memory_external_ids"} <= set(names)
        assert line.startswith(
            f"FAILED: downgrade through {', '.join(names)} refused: it would drop, by revision, "
        ), line
        assert (
            "0022_batch_jobs: the batch creates accepted and not yet written, and the record of "
            "those done (batch_jobs) (rows: batch_jobs not done: 0, batch_jobs: 0); "
        ) in line
        assert line.endswith(
            f"back up first, then force it with `alembic -x force=true downgrade {target}`"
        ), line
        # Nothing went down: the refusal came before the first revision ran.
        assert await _version(db) == head

    # Past 0012's newer neighbours, the refusal counts what 0012 would drop, keeping the -x
    # options given.
    await alembic_async(env, "-x", "force=true", "downgrade", "0014_idempotency_keys")
    async with db.connect() as connection:
        categories = (await connection.execute(text("SELECT count(*) FROM categories"))).scalar()
    refused = await run_cli_async(
        env, "alembic", "-x", "lock_timeout=7s", "downgrade", "0005_write_path"
    )
    (line,) = [ln for ln in refused.stdout.splitlines() if ln.startswith("FAILED:")]
    assert line.startswith(
        "FAILED: downgrade through 0012_categories, 0010_memory_context, 0007_tenants, "
        "0006_memory_external_ids refused: it would drop, by revision, 0012_categories: the "
        "categories a deployment added, the senders' UTC offsets and the audit trail's event "
        f"times, LLM gate verdicts and prompt versions (rows: categories: {categories}, "
        "messages with a UTC offset: 0, decisions with an event time, gate verdict or prompt "
        "version: 0); 0010_memory_context: "
    ), line
    assert line.endswith(
        "back up first, then force it with `alembic -x lock_timeout=7s -x force=true downgrade "
        "0005_write_path`"
    ), line
    # One revision that refuses: the refusal of that revision alone, as before.
    await alembic_async(env, "-x", "force=true", "downgrade", "0006_memory_external_ids")
    refused = await run_cli_async(env, "alembic", "downgrade", "0005_write_path")
    assert (
        "FAILED: downgrade of 0006_memory_external_ids refused: it would drop the external ids "
        "of imported memories (a rerun import would duplicate them) (rows: memories with an "
        "external id: 0); back up first, then force it with "
        "`alembic -x force=true downgrade 0005_write_path`\n"
    ) in refused.stdout, refused.stdout + refused.stderr[-2000:]
    async with db.connect() as connection:
        tables = set(
            (
                await connection.execute(
                    text("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
                )
            ).scalars()
        )
        kept = await connection.execute(
            text(
                "SELECT count(*) FROM information_schema.columns WHERE (table_name, column_name)"
                " IN (('memories', 'external_id'), ('messages', 'embedding_768d'))"
            )
        )
        assert kept.scalar_one() == 2
    assert {"ingest_decisions", "ingest_tasks", "memories", "messages"} <= tables
    await alembic_async(env, "upgrade", "head")
    # Dropping an index loses nothing: 0004 goes down unforced.
    await alembic_async(env, "-x", "force=true", "downgrade", "0004_outbox_user_pending")
    await alembic_async(env, "downgrade", "0003_ingestion")
    await alembic_async(env, "upgrade", "head")


def test_upgrade_sql_needs_no_database(migrated) -> None:
    """`alembic upgrade head --sql` writes the script for a DBA with no database URL at all."""
    env = {k: v for k, v in migrated.items() if k != "COGNIS_DATABASE_URL"}
    result = run_cli(env, "alembic", "upgrade", "head", "--sql")
    assert result.returncode == 0, result.stderr[-3000:]
    script = result.stdout
    assert script.index("SET lock_timeout = '500ms'") < script.index("CREATE TABLE memories")
    assert "SET statement_timeout" in script
    # Indexes on tables that already hold data are built without blocking writes.
    for index in ("messages_user_idempotency_key_idx", "memories_user_external_id_idx"):
        assert f"CONCURRENTLY IF NOT EXISTS {index}" in script, index
    custom = run_cli(env, "alembic", "-x", "lock_timeout=2s", "upgrade", "head", "--sql")
    assert "SET lock_timeout = '2s'" in custom.stdout


async def test_a_migration_gives_up_on_a_held_lock(
    scratch: Scratch, scratch_at_head: AsyncEngine
) -> None:
    """lock_timeout: a migration waiting behind a long transaction gives up after each short
    slice instead of queueing every reader and writer behind its ACCESS EXCLUSIVE request, tries
    again until lock_retry_s have passed, then fails with one line saying to rerun."""
    env, db = scratch.env, scratch_at_head
    async with db.connect() as holder:
        await holder.execute(text("LOCK TABLE memories IN ACCESS SHARE MODE"))
        result = await run_cli_async(
            env,
            "alembic",
            "-x",
            "lock_timeout=1s",
            "-x",
            "concurrent_lock_timeout=1s",  # its first step on memories drops an index
            "-x",
            "lock_retry_s=2",
            "-x",
            "force=true",
            "downgrade",
            "0005_write_path",
        )
        await holder.rollback()
    assert result.returncode != 0
    # One line saying to rerun, not a traceback; a line before each new try.
    assert "Traceback" not in result.stderr, result.stderr[-2000:]
    assert "lock_timeout (1s) passed waiting for a lock at `" in result.stderr, result.stderr
    assert "try 2 in" in result.stderr, result.stderr[-2000:]
    (line,) = [ln for ln in result.stdout.splitlines() if ln.startswith("FAILED:")]
    assert "lock_timeout (1s) for a lock another session holds in each of" in line
    assert "rerun the same command" in line and "-x lock_retry_s=" in line
    async with db.connect() as connection:
        version = (
            await connection.execute(text("SELECT version_num FROM alembic_version"))
        ).scalar_one()
        external_id = (
            await connection.execute(
                text(
                    "SELECT count(*) FROM information_schema.columns "
                    "WHERE table_name = 'memories' AND column_name = 'external_id'"
                )
            )
        ).scalar_one()
    # The first step that needed the lock on memories was rolled back, so the downgrade stopped
    # short: steps above it that touch no memories lock may have gone, 0006's never ran.
    assert version != "0005_write_path"
    assert external_id == 1
    await alembic_async(env, "upgrade", "head")


async def _memories_of_two_tenants(scratch: Scratch) -> dict[str, str]:
    """The scratch database at 0027, with memories of two tenants; tenant -> its id."""
    await upgrade_in_process(scratch.url, "0027_console_sessions")
    vec = "array_fill(0.1::real, ARRAY[{}])::vector"
    other = "6a6a6a6a-0000-4000-8000-000000000028"
    rows = {"default": "00000000-0000-0000-0000-000000000001", "other": other}
    engine = create_async_engine(scratch.url)
    try:
        async with engine.begin() as connection:
            await connection.execute(
                text("INSERT INTO tenants (id, name) VALUES (:id, 'other')"), {"id": other}
            )
        for tenant, texts in LANGUAGE_CONTENTS.items():
            async with engine.begin() as connection:
                await connection.execute(
                    text("SELECT set_config('cognis.tenant_id', :t, true)"), {"t": rows[tenant]}
                )
                for content in texts:
                    await connection.execute(
                        text(
                            "INSERT INTO memories (id, user_id, chain_id, version, content,"  # noqa: S608 (constants)
                            " category, embedding_768d, embedding_256d) VALUES (gen_random_uuid(),"
                            f" 'u', gen_random_uuid(), 1, :content, 'travel', {vec.format(768)},"
                            f" {vec.format(256)})"
                        ),
                        {"content": content},
                    )
    finally:
        await engine.dispose()
    return rows


LANGUAGE_CONTENTS = {
    "default": ["I moved to Leeds in March", "👍"],
    "other": ["毎週金曜日に卓球をする"],
}
DETECTED = {"I moved to Leeds in March": "en", "👍": None, "毎週金曜日に卓球をする": "ja"}


async def _languages(scratch: Scratch, tenants: dict[str, str]) -> dict[str, str | None]:
    found: dict[str, str | None] = {}
    engine = create_async_engine(scratch.url)
    try:
        for tenant in tenants.values():
            async with engine.begin() as connection:
                await connection.execute(
                    text("SELECT set_config('cognis.tenant_id', :t, true)"), {"t": tenant}
                )
                result = await connection.execute(text("SELECT content, language FROM memories"))
                found.update(dict(result.tuples().all()))
    finally:
        await engine.dispose()
    return found


async def test_the_language_backfill_reaches_every_tenant(scratch: Scratch) -> None:
    """0028 detects the language of the memories already stored on a small database, of every
    tenant (row security hides each tenant's rows until the migration binds it), and leaves a
    memory without letters NULL."""
    tenants = await _memories_of_two_tenants(scratch)
    await alembic_async(scratch.env, "upgrade", "head")
    assert await _languages(scratch, tenants) == DETECTED


async def test_a_big_language_backfill_is_left_to_its_command(scratch: Scratch) -> None:
    """Over inline_backfill_rows versions, 0028 adds the column, says so and leaves the rows to
    `python -m app detect-languages` (issue 54: a million versions held `alembic upgrade` for
    most of an hour), which labels every tenant's rows as the background role; a rerun finds
    nothing left but the memory without letters."""
    tenants = await _memories_of_two_tenants(scratch)
    upgraded = await alembic_async(
        scratch.env, "-x", "inline_backfill_rows=2", "upgrade", "0028_memory_language"
    )
    assert "about 3 memory versions, more than 2 to label here" in upgraded.stderr
    assert "`python -m app detect-languages`" in upgraded.stderr
    assert set((await _languages(scratch, tenants)).values()) == {None}
    await upgrade_in_process(scratch.url, "head")
    database = make_url(scratch.url).database
    env = {
        **scratch.env,
        **{
            name: make_url(scratch.env[name]).set(database=database).render_as_string(False)
            for name in ("COGNIS_DATABASE_URL", "COGNIS_WORKER_DATABASE_URL")
        },
    }
    ran = await run_cli_async(env, "app", "detect-languages", "--batch-size", "2")
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert "2 versions read, " in ran.stdout, ran.stdout  # batch by batch
    assert "done: 2 of 3 versions labelled" in ran.stdout, ran.stdout
    assert await _languages(scratch, tenants) == DETECTED
    again = await run_cli_async(env, "app", "detect-languages")
    assert "done: 0 of 1 versions labelled" in again.stdout, again.stdout + again.stderr[-2000:]
