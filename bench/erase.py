"""Erase at scale: the time of erasing one user with 10,000 messages in a database of 1M memory
versions, and how long the user's lock is held (issue 42).

A scratch database (created by the owner on its server, migrated to head, dropped at the end)
is filled by SQL (bench/synthetic.py: zero vectors, which take the space real ones take, and
most versions superseded, as a year of updates leaves them):

- the erased user, `erase-me-0` of the default tenant: --user-messages messages, twice as many
  memory versions (chains of 4: a quarter current, one chain in 20 deleted), a task per
  message, a decision per version, a delivered outbox event per ten versions;
- the same user id in a second tenant, half that size: an erase must leave it whole;
- other users of the default tenant (500 versions, 250 messages each) up to --versions
  memory versions in all.

Then the service's erase transaction (app/memories/erasure.py erase_user and the queued
OpenSearch erase, as UserEraser.erase runs them, as the request role) erases the user, while
two probes run: a write of the same user that begins 0.2 s into the erase (it waits for the
user's lock and is then refused: it began before erased_at) and a writer of another user that
stores a message every 50 ms (its slowest write during the erase says whether the erase
blocks anyone else). OpenSearch is not part of it: its delete-by-query runs after the commit,
outside the lock. Finally, what migration 0024's index saves: the cost of deleting a few
messages with and without memories_source_message_id_idx (in transactions rolled back), per
message and multiplied out to the user's messages.

Prints numbers; asserts nothing. Timings on a shared 2-core machine are noisy.

    make bench-erase BENCH_ARGS="--versions 1000000 --user-messages 10000"
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
import uuid
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import event, text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.config import Settings
from app.db.engine import create_engine, create_sessionmaker
from app.db.models import Message
from app.db.tenant import DEFAULT_TENANT_ID, tenant_scope
from app.errors import UserErasedError
from app.logging import configure_logging
from app.memories.erasure import erase_user
from app.memories.user_lock import hold_for_write
from app.search_index import outbox
from bench.database import measure_in_scratch_database, owner_engine
from bench.synthetic import Users, fill

ERASED = "erase-me-0"
OTHER_TENANT = uuid.UUID("00000000-0000-0000-0000-0000000000e2")
TABLES = ("memories", "messages", "ingest_tasks", "ingest_decisions", "outbox")
_SET_TENANT = text("SELECT set_config('cognis.tenant_id', :t, true)")


def shape(versions: int, user_messages: int) -> list[Users]:
    erased = Users(DEFAULT_TENANT_ID, "erase-me-", 1, user_messages // 2, 4, user_messages)
    twin = Users(OTHER_TENANT, "erase-me-", 1, user_messages // 4, 4, user_messages // 2)
    rest = versions - erased.memory_versions - twin.memory_versions
    others = Users(DEFAULT_TENANT_ID, "user-", max(rest // 500, 0), 125, 4, 250)
    return [erased, twin, others]


async def rows_of(owner: AsyncEngine, tenant_id: uuid.UUID, user_id: str) -> dict[str, int]:
    async with owner.begin() as connection:
        await connection.execute(_SET_TENANT, {"t": str(tenant_id)})
        return {
            table: int(
                (
                    await connection.execute(
                        text(f"SELECT count(*) FROM {table} WHERE user_id = :u"),
                        {"u": user_id},
                    )
                ).scalar_one()
            )
            for table in TABLES
        }


class StatementClock:
    """Each statement's time on an engine, and when it ended, while `on`."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.on = False
        self.timings: list[tuple[str, float, float]] = []
        event.listen(engine.sync_engine, "before_cursor_execute", self._before)
        event.listen(engine.sync_engine, "after_cursor_execute", self._after)

    def _before(self, conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        conn.info["bench_started"] = time.perf_counter()

    def _after(self, conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if self.on:
            ended = time.perf_counter()
            what = " ".join(statement.split()[:3])[:60]
            self.timings.append((what, ended - conn.info["bench_started"], ended))

    def ended(self, fragment: str) -> float | None:
        """When the first statement containing `fragment` ended."""
        return next((end for what, _, end in self.timings if fragment in what), None)


async def other_writer(sessions: Any, stop: asyncio.Event, slowest: list[float]) -> None:
    """Another user's messages, one every 50 ms: the slowest write while the erase runs."""
    with tenant_scope(DEFAULT_TENANT_ID):
        while not stop.is_set():
            started = time.perf_counter()
            async with sessions() as session, session.begin():
                await hold_for_write(session, "user-1")
                session.add(
                    Message(
                        user_id="user-1",
                        content="written during the erase",
                        sent_at=datetime.now(UTC),
                    )
                )
            slowest.append(time.perf_counter() - started)
            await asyncio.sleep(0.05)


async def same_user_writer(sessions: Any, result: dict[str, Any]) -> None:
    """A write of the erased user that begins 0.2 s into the erase."""
    await asyncio.sleep(0.2)
    with tenant_scope(DEFAULT_TENANT_ID):
        started = time.perf_counter()
        try:
            async with sessions() as session, session.begin():
                await hold_for_write(session, ERASED)
            result["outcome"] = "accepted"
        except UserErasedError:
            result["outcome"] = "refused (409: began before erased_at)"
        result["waited_s"] = time.perf_counter() - started


async def fk_cost(owner: AsyncEngine, messages: int) -> dict[str, float]:
    """Deleting `messages` of another user's messages (rolled back), with and without the
    index on memories.source_message_id: ms per message spent in the key's SET NULL. The
    same delete runs once before, unmeasured: the key's first use in a session plans its
    query."""
    delete = (
        "DELETE FROM messages WHERE id IN (SELECT id FROM messages WHERE user_id = :u"
        " ORDER BY id LIMIT :n)"
    )
    costs: dict[str, float] = {}
    for label, drop in (("with the index", False), ("without it (before 0024)", True)):
        async with owner.connect() as connection:
            transaction = await connection.begin()
            await connection.execute(_SET_TENANT, {"t": str(DEFAULT_TENANT_ID)})
            if drop:
                await connection.execute(text("DROP INDEX memories_source_message_id_idx"))
            await connection.execute(text(delete), {"u": "user-3", "n": 1})
            plan: Any = (
                await connection.execute(
                    text(f"EXPLAIN (ANALYZE, FORMAT JSON) {delete}"), {"u": "user-2", "n": messages}
                )
            ).scalar_one()
            await transaction.rollback()
        document = plan if isinstance(plan, list) else json.loads(plan)
        set_null = sum(
            t["Time"]
            for t in document[0].get("Triggers", [])
            if "source_message" in t.get("Constraint Name", "")
        )
        costs[label] = set_null / messages
    return costs


async def measure(settings: Settings, args: argparse.Namespace) -> None:
    owner = owner_engine(settings)
    engine = create_engine(settings.store, application="bench-erase")
    sessions = create_sessionmaker(engine)
    probe_engine = create_engine(settings.store, application="bench-erase-probes")
    probes = create_sessionmaker(probe_engine)
    try:
        groups = shape(args.versions, args.user_messages)
        print(
            f"filling: {sum(g.memory_versions for g in groups):,} memory versions "
            f"({', '.join(f'{g.users} x {g.prefix}: {g.memory_versions:,}' for g in groups)})",
            flush=True,
        )
        await fill(owner, groups, vectors="zero", progress=lambda s: print(s, flush=True))
        async with owner.connect() as connection:
            size: str = (
                await connection.execute(
                    text("SELECT pg_size_pretty(pg_total_relation_size('memories'))")
                )
            ).scalar_one()
        before = await rows_of(owner, DEFAULT_TENANT_ID, ERASED)
        twin_before = await rows_of(owner, OTHER_TENANT, ERASED)
        print(f"memories table: {size}; {ERASED}: {before}", flush=True)
        clock = StatementClock(engine)
        stop = asyncio.Event()
        slowest: list[float] = []
        probe: dict[str, Any] = {}
        writer = asyncio.create_task(other_writer(probes, stop, slowest))
        await asyncio.sleep(0.5)
        slowest.clear()
        with tenant_scope(DEFAULT_TENANT_ID):
            same = asyncio.create_task(same_user_writer(probes, probe))
            clock.on = True
            started = time.perf_counter()
            async with sessions() as session, session.begin():
                counts, _ = await erase_user(session, ERASED, settings.relay.erase_tombstone_s)
                outbox.enqueue_erase(session, ERASED, hold_s=settings.relay.erase_handoff_s)
                await session.flush()
            committed = time.perf_counter()
            clock.on = False
        await same
        await asyncio.sleep(0.2)
        stop.set()
        await writer
        after = await rows_of(owner, DEFAULT_TENANT_ID, ERASED)
        twin_after = await rows_of(owner, OTHER_TENANT, ERASED)
        granted = clock.ended("advisory") or started
        costs = await fk_cost(owner, args.fk_messages)

        print(f"\nerased {ERASED}: {counts}")
        print("| step | s |\n|---|---:|")
        for what, seconds, _ in clock.timings:
            if seconds >= 0.001:
                print(f"| {what} | {seconds:.3f} |")
        print(f"\nerase transaction, begin to commit: {committed - started:.2f} s")
        print(f"user's lock held (granted to commit): {committed - granted:.2f} s")
        print(
            f"a write of the same user begun 0.2 s in: waited {probe.get('waited_s', 0):.2f} s,"
            f" {probe.get('outcome')}"
        )
        print(
            f"another user's writes during the erase: {len(slowest)},"
            f" slowest {max(slowest, default=0) * 1000:.0f} ms"
        )
        print(f"rows of {ERASED} left: {after} (in outbox: the queued OpenSearch erase)")
        print(f"the same user id in another tenant: {twin_before} before, {twin_after} after")
        for label, ms in costs.items():
            print(
                f"deleting a message, {label}: {ms:.2f} ms in the key's SET NULL;"
                f" x {before['messages']:,} messages = {ms * before['messages'] / 1000:.1f} s"
            )
    finally:
        await engine.dispose()
        await probe_engine.dispose()
        await owner.dispose()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--versions", type=int, default=1_000_000, help="memory versions in all")
    parser.add_argument("--user-messages", type=int, default=10_000, help="the erased user's")
    parser.add_argument("--fk-messages", type=int, default=10, help="messages deleted per FK test")
    parser.add_argument("--database", help="scratch database name (default: a new one)")
    parser.add_argument("--keep", action="store_true", help="keep the scratch database")
    args = parser.parse_args()
    base = Settings()
    configure_logging("WARNING", False)

    name = args.database or f"cognis_bench_erase_{uuid.uuid4().hex[:8]}"
    return measure_in_scratch_database(
        base, name, lambda settings, _: measure(settings, args), keep=args.keep
    )


if __name__ == "__main__":
    sys.exit(main())
