"""Retention: rows whose use is over, deleted in small batches, each found by an index.

Seven tables grow with use and never shrink on their own: delivered outbox events, expired
idempotency keys, finished ingestion tasks (the jobs `GET .../jobs/{id}` reports), finished
batch jobs, delivered webhook events, expired console logins, and erase tombstones whose write
block has passed. The retention job deletes them, beside the outbox relay and the expiry reaper
(app/runtime.py), every COGNIS_RETENTION_INTERVAL_S and once at start-up; `python -m app
retention` runs one pass.

Each batch is one short transaction of at most COGNIS_RETENTION_BATCH_SIZE rows:

    DELETE FROM t WHERE ctid = ANY(ARRAY(
        SELECT ctid FROM t WHERE <due> ORDER BY <indexed column> LIMIT n FOR UPDATE SKIP LOCKED
    )) AND <due>

The inner scan walks the policy's index (migrations 0026_retention and 0036_webhook_dispatch)
from its oldest entry, so a batch costs the same whether a thousand rows or a million are due,
and nothing scans the table. SKIP LOCKED: a row some request holds (an expired idempotency
key being taken over) is left for the next pass, never waited for, and two processes running
the job share the work instead of queueing behind each other. The outer `<due>`, checked again
on the row the delete finds, keeps a row that a concurrent write made current again (a key
taken over).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

import structlog
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.config import RetentionSettings
from app.db.tenant import tenant_scope
from app.metrics import RETENTION_PURGED
from app.wakeup import work_until_stopped

log = structlog.get_logger(__name__)

DAY_S = 86_400.0


@dataclass(frozen=True, slots=True)
class Policy:
    """What one table keeps: rows matching `due` are deleted, oldest `order` first."""

    table: str
    # SQL: the rows whose use is over. `:age_s` is the policy's age in seconds, where it has one.
    due: str
    # The column the supporting index is ordered by (the batch's ORDER BY).
    order: str
    # The index that finds due rows (tests/db/test_retention.py checks the plan can use it);
    # None for a table of a handful of rows.
    index: str | None
    # The age after which a row is due, from the settings; None: no age (`due` says when), 0:
    # kept forever (the policy is skipped).
    age_s: Callable[[RetentionSettings], float] | None = None

    # The statements are built from the constants below, never from input.
    def delete_batch(self) -> str:
        return (
            f"DELETE FROM {self.table} WHERE ctid = ANY(ARRAY("  # noqa: S608
            f"SELECT ctid FROM {self.table} WHERE {self.due} ORDER BY {self.order} "
            f"LIMIT :limit FOR UPDATE SKIP LOCKED)) AND {self.due}"
        )

    def count_due(self) -> str:
        return f"SELECT count(*) FROM {self.table} WHERE {self.due}"  # noqa: S608

    def overdue(self) -> str:
        # min() over the due rows is the first entry of the policy's index.
        return (
            f"SELECT greatest(coalesce(extract(epoch FROM now() - min({self.order})) - "  # noqa: S608
            f":age_s, 0), 0) FROM {self.table} WHERE {self.due}"
        )


POLICIES: tuple[Policy, ...] = (
    Policy(
        "outbox",
        "processed_at IS NOT NULL AND processed_at < now() - :age_s * interval '1 second'",
        "processed_at",
        "outbox_delivered_idx",
        lambda s: s.outbox_retention_hours * 3600,
    ),
    Policy(
        "idempotency_keys",
        "expires_at <= now()",
        "expires_at",
        "idempotency_keys_expires_at_idx",
    ),
    Policy(
        "ingest_tasks",
        "state IN ('done', 'failed') AND finished_at < now() - :age_s * interval '1 second'",
        "finished_at",
        "ingest_tasks_finished_idx",
        lambda s: s.ingest_task_retention_days * DAY_S,
    ),
    Policy(
        "batch_jobs",
        "status IN ('done', 'failed') AND finished_at < now() - :age_s * interval '1 second'",
        "finished_at",
        "batch_jobs_finished_idx",
        lambda s: s.batch_job_retention_days * DAY_S,
    ),
    # Delivered webhook events (their attempt log goes with them: ON DELETE CASCADE); pending
    # and dead ones stay, a dead one until it is redelivered or its subscription deleted.
    Policy(
        "webhook_deliveries",
        "status = 'delivered' AND delivered_at < now() - :age_s * interval '1 second'",
        "delivered_at",
        "webhook_deliveries_delivered_idx",
        lambda s: s.webhook_retention_days * DAY_S,
    ),
    # Console logins past COGNIS_CONSOLE_SESSION_HOURS (logging out deletes its own at once).
    Policy(
        "console_sessions",
        "expires_at <= now()",
        "expires_at",
        "console_sessions_expires_at_idx",
    ),
    # A tombstone lives COGNIS_ERASE_TOMBSTONE_S (a day): a row per user erased that day.
    Policy(
        "user_erasures",
        "writes_refused_until < clock_timestamp()",
        "writes_refused_until",
        None,
    ),
)


def _parameters(policy: Policy, retention: RetentionSettings) -> dict[str, float] | None:
    """The policy's bind parameters, or None when its table is kept forever."""
    if policy.age_s is None:
        return {}
    age_s = policy.age_s(retention)
    return None if age_s <= 0 else {"age_s": age_s}


async def purge_batch(
    session: AsyncSession, policy: Policy, retention: RetentionSettings, limit: int
) -> int:
    """One batch of `policy`'s due rows, deleted in the caller's transaction (a background
    one with no tenant bound: every tenant's rows). The number deleted."""
    parameters = _parameters(policy, retention)
    if parameters is None:
        return 0
    result = await session.execute(text(policy.delete_batch()), {**parameters, "limit": limit})
    return int(result.rowcount or 0)  # type: ignore[attr-defined]


async def count_due(session: AsyncSession, policy: Policy, retention: RetentionSettings) -> int:
    """How many of `policy`'s rows a pass would delete now (0 for a table kept forever)."""
    parameters = _parameters(policy, retention)
    if parameters is None:
        return 0
    return int((await session.execute(text(policy.count_due()), parameters)).scalar_one())


async def overdue_seconds(session: AsyncSession, retention: RetentionSettings) -> dict[str, float]:
    """Per table, how long its oldest due row has been due (0: none; /metrics reads it, so an
    alert sees a job that stopped running, in whichever process it was meant to run)."""
    overdue: dict[str, float] = {}
    for policy in POLICIES:
        parameters = _parameters(policy, retention)
        if parameters is None:
            overdue[policy.table] = 0.0
            continue
        result = await session.execute(text(policy.overdue()), {"age_s": 0.0, **parameters})
        overdue[policy.table] = float(result.scalar_one())
    return overdue


class RetentionJob:
    """Runs every policy in batches of their own transaction: at start-up, then every
    COGNIS_RETENTION_INTERVAL_S, beside the outbox relay (app/runtime.py)."""

    def __init__(
        self, sessionmaker: async_sessionmaker[AsyncSession], retention: RetentionSettings
    ) -> None:
        self._sessionmaker = sessionmaker
        self._retention = retention

    async def purge_table(self, policy: Policy) -> int:
        """Batches of `policy` until one comes back short: every row due by now."""
        limit = self._retention.retention_batch_size
        total = 0
        while True:
            # No tenant bound, whoever calls: the background role then sees every tenant's rows.
            with tenant_scope(None):
                async with self._sessionmaker() as session, session.begin():
                    deleted = await purge_batch(session, policy, self._retention, limit)
            total += deleted
            RETENTION_PURGED.labels(table=policy.table).inc(deleted)
            if deleted < limit:
                return total

    async def run_once(self) -> dict[str, int]:
        """One pass over every table: the rows deleted per table."""
        purged = {policy.table: await self.purge_table(policy) for policy in POLICIES}
        if any(purged.values()):
            log.info("retention.purged", **purged)
        return purged

    async def due(self) -> dict[str, int]:
        """The rows a pass would delete now, per table (`python -m app retention --dry-run`)."""
        with tenant_scope(None):
            async with self._sessionmaker() as session, session.begin():
                return {
                    policy.table: await count_due(session, policy, self._retention)
                    for policy in POLICIES
                }

    async def run_forever(self, stop: asyncio.Event) -> None:
        """Until `stop` is set: a pass now, then one every interval (0: never)."""
        interval = self._retention.retention_interval_s
        if interval <= 0:
            return
        log.info("retention.started", interval_s=interval)

        async def one_pass() -> bool:
            await self.run_once()
            return False  # every row due by now is gone: the next pass in one interval

        # Nothing wakes it early: retention is a matter of time.
        await work_until_stopped(one_pass, asyncio.Event(), stop, interval, "retention.error")
        log.info("retention.stopped")
