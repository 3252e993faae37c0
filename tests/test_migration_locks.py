"""Migrations under a long reader and when killed (issue 54), on scratch databases.

A migration that needs ACCESS EXCLUSIVE on memories while a long reader holds it waits one
short lock_timeout, rolls back and tries again (app/db/migration_locks.py): the traffic queued
behind its request waits one slice at a time, not until the reader ends. A migration killed
in the middle of a concurrent index build leaves no build running on the server.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from collections.abc import AsyncIterator

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from app.db.migration_locks import LOCK_NOT_AVAILABLE, QUERY_CANCELED, LockRetry
from tests.conftest import ROOT, run_cli_async, upgrade_in_process
from tests.schema_dump import scratch_database
from tests.test_migrations import Scratch


@pytest.fixture
async def scratch(migrated: dict[str, str]) -> AsyncIterator[Scratch]:
    """An empty database of the test's own (tests/test_migrations.py's)."""
    async with scratch_database(migrated["COGNIS_MIGRATION_DATABASE_URL"]) as url:
        yield Scratch(url, {**migrated, "COGNIS_MIGRATION_DATABASE_URL": url})


async def _migration_waits(engine: AsyncEngine, stop: asyncio.Event) -> list[float]:
    """Every 50 ms: whether the migration's session waits for a lock on memories (its queued
    ACCESS EXCLUSIVE request is what holds every later reader); the length of each run of
    samples that saw it waiting, in seconds (from the first sample to the last)."""
    runs: list[float] = []
    first = last = None
    async with engine.connect() as connection:
        await connection.execution_options(isolation_level="AUTOCOMMIT")
        while not stop.is_set():
            waiting = (
                await connection.execute(
                    text(
                        "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid)"
                        " WHERE a.application_name = 'cognis-migrate' AND NOT l.granted"
                        " AND l.relation = 'memories'::regclass"
                    )
                )
            ).scalar_one()
            now = time.monotonic()
            if waiting:
                first, last = first or now, now
            elif first is not None and last is not None:
                runs.append(last - first)
                first = last = None
            await asyncio.sleep(0.05)
    if first is not None and last is not None:
        runs.append(last - first)
    return runs


async def _traffic(engine: AsyncEngine, stop: asyncio.Event) -> list[float]:
    """A reader's short statements on memories, one transaction each: their durations."""
    took = []
    async with engine.connect() as connection:
        while not stop.is_set():
            started = time.monotonic()
            async with connection.begin():
                await connection.execute(text("SELECT count(*) FROM memories"))
            took.append(time.monotonic() - started)
            await asyncio.sleep(0.02)
    return took


async def test_a_long_reader_makes_the_migration_wait_not_the_traffic(scratch: Scratch) -> None:
    """0039 adds a column to memories (ACCESS EXCLUSIVE, a catalog change). A report holds
    memories for 6 s: the migration gives up after each 500 ms slice and tries again; between
    tries the traffic goes on; once the report ends, the migration completes."""
    await upgrade_in_process(scratch.url, "0038_batch_job_traceparent")
    engine = create_async_engine(scratch.url, pool_size=4)
    stop = asyncio.Event()
    try:
        async with engine.connect() as report:
            await report.execute(text("SELECT count(*) FROM memories"))  # ACCESS SHARE, held
            sampler = asyncio.create_task(_migration_waits(engine, stop))
            traffic = asyncio.create_task(_traffic(engine, stop))
            migration = asyncio.create_task(
                run_cli_async(
                    {**scratch.env, "COGNIS_MIGRATION_LOCK_TIMEOUT": "500ms"},
                    "alembic",
                    "upgrade",
                    "0039_entities",
                )
            )
            await asyncio.sleep(6)
            assert not migration.done()  # still trying while the report runs
            await report.rollback()
        result = await migration
        stop.set()
        waits, took = await sampler, await traffic
        async with engine.connect() as connection:
            version = await connection.execute(text("SELECT version_num FROM alembic_version"))
            assert version.scalar_one() == "0039_entities"
    finally:
        stop.set()
        await engine.dispose()
    assert result.returncode == 0, result.stderr[-3000:]
    tries = [line for line in result.stderr.splitlines() if "lock_timeout (500ms) passed" in line]
    assert len(tries) >= 2, result.stderr[-3000:]
    assert "rolled back, traffic goes on; try 2 in" in tries[0]
    # The migration's lock request was seen queued in several slices, each about 500 ms (a
    # sample every 50 ms on a busy machine: generous bounds), never for the report's 6 s.
    assert len(waits) >= 2, waits
    assert max(waits) < 1.5, waits
    # What the traffic felt: no statement waited for the report's length.
    assert len(took) > 20 and max(took) < 2.5, max(took)


async def _active_builds(engine: AsyncEngine) -> list[int]:
    async with engine.connect() as connection:
        found = await connection.execute(
            text(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
                " AND state = 'active' AND query ILIKE 'CREATE INDEX CONCURRENTLY%'"
            )
        )
        return list(found.scalars())


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "kill-9"])
async def test_a_killed_migration_leaves_no_index_build_running(
    scratch: Scratch, how: signal.Signals
) -> None:
    """0040 builds indexes concurrently; a transaction with an old snapshot keeps the first
    build waiting in its last phase. The `alembic` process is stopped there: the build stops
    on the server too (SIGTERM: cancelled by the process; kill -9: the server notices the
    connection gone), while that transaction is still open. The rerun drops the INVALID index
    it left and builds it again."""
    await upgrade_in_process(scratch.url, "0039_entities")
    engine = create_async_engine(scratch.url)
    old = create_async_engine(scratch.url, isolation_level="REPEATABLE READ")
    try:
        async with old.connect() as old_snapshot:
            await old_snapshot.execute(text("SELECT 1"))  # a snapshot, no lock
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "alembic",
                "upgrade",
                "0040_lookup_indexes",
                cwd=ROOT,
                env=scratch.env,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
            try:
                deadline = time.monotonic() + 60
                while not await _active_builds(engine):
                    assert time.monotonic() < deadline, "the build never started"
                    assert process.returncode is None
                    await asyncio.sleep(0.1)
                await asyncio.sleep(0.5)  # into its wait for the old snapshot
                os.kill(process.pid, how)
                _, stderr = await asyncio.wait_for(process.communicate(), 30)
            finally:
                if process.returncode is None:
                    process.kill()
            if how == signal.SIGTERM:
                # Cancelled by the process before it exited, not found gone by the server later.
                assert await _active_builds(engine) == []
            deadline = time.monotonic() + 10
            while builds := await _active_builds(engine):
                assert time.monotonic() < deadline, f"builds still running: {builds}"
                await asyncio.sleep(0.1)
            await old_snapshot.rollback()
        if how == signal.SIGTERM:
            assert process.returncode == 128 + signal.SIGTERM, stderr.decode()[-2000:]
            assert "migration stopped by SIGTERM" in stderr.decode()
        await upgrade_in_process(scratch.url, "0040_lookup_indexes")
        async with engine.connect() as connection:
            invalid = await connection.execute(
                text("SELECT indexrelid::regclass::text FROM pg_index WHERE NOT indisvalid")
            )
            assert list(invalid.scalars()) == []
            built = await connection.execute(
                text(
                    "SELECT count(*) FROM pg_class WHERE relname = 'ingest_decisions_memory_id_idx'"
                )
            )
            assert built.scalar_one() == 1
    finally:
        await engine.dispose()
        await old.dispose()


class _Error(Exception):
    def __init__(self, sqlstate: str) -> None:
        super().__init__(sqlstate)
        self.orig = type("Orig", (), {"sqlstate": sqlstate})()


def test_tries_back_off_until_the_budget_is_spent() -> None:
    """Waits double from 0.5 s up to 10 s (jittered by a quarter), the last one cut to what
    is left; another error, or a spent budget, is not tried again."""
    retry = LockRetry(budget_s=20.0)
    assert retry.next_wait(_Error(QUERY_CANCELED)) is None
    waits = []
    while (wait := retry.next_wait(_Error(LOCK_NOT_AVAILABLE))) is not None:
        waits.append(wait)
        retry.started -= wait  # as if it had waited
    assert 0.375 <= waits[0] <= 0.625 and 0.75 <= waits[1] <= 1.25
    assert all(wait <= 12.5 for wait in waits)
    assert sum(waits) == pytest.approx(20.0, abs=0.1)
    assert retry.tries == len(waits) + 1
    assert LockRetry(budget_s=0).next_wait(_Error(LOCK_NOT_AVAILABLE)) is None
