"""Retention (app/db/retention.py): each table loses exactly the rows whose use is over, in
batches, each batch found through its index; the job's settings refuse a job that would go
before its idempotency key; `python -m app retention` runs one pass or counts what is due."""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from app.config import Settings
from app.db.retention import POLICIES, RetentionJob, overdue_seconds
from app.metrics import RETENTION_PURGED
from tests.conftest import InProcessApi, run_cli_async

# Shorter than the service's defaults (and than the session's relay, which purges delivered
# outbox rows after 24 h itself): rows aged past these are due for this test's job only.
AGES = {
    "outbox_retention_hours": 1.0,
    "ingest_task_retention_days": 2.0,
    "batch_job_retention_days": 2.0,
    "webhook_retention_days": 2.0,
    "idempotency_ttl_s": 3600.0,
}


def job_session(inprocess_api: InProcessApi) -> AsyncSession:
    """A session of the background role with no tenant bound: every tenant's rows."""
    return inprocess_api.app.state.runtime.background_sessionmaker()


def _job(inprocess_api: InProcessApi, **changes: object) -> RetentionJob:
    runtime = inprocess_api.app.state.runtime
    settings = runtime.settings.model_copy(update={**AGES, **changes})
    return RetentionJob(runtime.background_sessionmaker, settings.retention)


async def _seed(db: AsyncEngine, user_id: str) -> dict[str, dict[str, list[str]]]:
    """Rows of every table of `user_id`, some due and some not: {table: {"due": ids, "kept":
    ids}} (ids as text; the tenant is the default one, `db`'s)."""
    rows: dict[str, dict[str, list[str]]] = {}
    async with db.begin() as connection:

        async def ids(sql: str, **params: object) -> list[str]:
            result = await connection.execute(text(sql), {"user": user_id, **params})
            return [str(value) for value in result.scalars()]

        outbox = (
            "INSERT INTO outbox (user_id, op, memory_id, processed_at) "
            "SELECT :user, 'delete_document', gen_random_uuid(), "
            "now() - CAST(CAST(:ago AS text) AS interval) FROM generate_series(1, :n) RETURNING id"
        )
        rows["outbox"] = {
            # Delivered two hours ago: due. Delivered a minute ago: kept.
            "due": await ids(outbox, ago="2 hours", n=5),
            "kept": await ids(outbox, ago="1 minute", n=1),
        }

        keys = (
            "INSERT INTO idempotency_keys (user_id, key, route, request_hash, state, "
            "response_status, response_body, expires_at) "
            "VALUES (:user, :key, 'POST /v1/x', '\\x00', 'done', 201, '\\x7b7d', "
            "now() + CAST(CAST(:left AS text) AS interval)) RETURNING key"
        )
        rows["idempotency_keys"] = {
            "due": await ids(keys, key="expired", left="-1 second"),
            "kept": await ids(keys, key="live", left="1 hour"),
        }

        messages = await ids(
            "INSERT INTO messages (id, user_id, content, sent_at) SELECT gen_random_uuid(), "
            ":user, 'message ' || n, now() FROM generate_series(1, 4) AS n RETURNING id"
        )
        task = (
            "INSERT INTO ingest_tasks (message_id, job_id, user_id, sent_at, state, finished_at)"
            " VALUES (CAST(:message AS uuid), gen_random_uuid(), :user, now(), :state, "
            "now() - CAST(CAST(:ago AS text) AS interval)) RETURNING message_id"
        )
        rows["ingest_tasks"] = {
            "due": [
                *await ids(task, message=messages[0], state="done", ago="3 days"),
                *await ids(task, message=messages[1], state="failed", ago="3 days"),
            ],
            "kept": [
                *await ids(task, message=messages[2], state="done", ago="1 day"),
                # Open work is never due, whatever its times say.
                *await ids(task, message=messages[3], state="queued", ago="9 days"),
            ],
        }

        job = (
            "INSERT INTO batch_jobs (id, user_id, queue, batch, memories, status, finished_at) "
            "VALUES (gen_random_uuid(), :user, 'retention-test', '[]', 0, :status, "
            "now() - CAST(CAST(:ago AS text) AS interval)) RETURNING id"
        )
        rows["batch_jobs"] = {
            "due": [
                *await ids(job, status="done", ago="3 days"),
                *await ids(job, status="failed", ago="3 days"),
            ],
            "kept": [
                *await ids(job, status="done", ago="1 day"),
                *await ids(job, status="running", ago="9 days"),
            ],
        }

        # An inactive subscription: no test's writes queue deliveries for it.
        (subscription,) = await ids(
            "INSERT INTO webhook_subscriptions (url, secret, event_types, active) VALUES "
            "('https://example.com/hook', 'whsec_AA==', ARRAY['memory.created'], false) "
            "RETURNING id"
        )
        delivery = (
            "INSERT INTO webhook_deliveries (subscription_id, event_id, user_id, type, payload,"
            " status, created_at, delivered_at) VALUES (CAST(:subscription AS uuid), "
            "gen_random_uuid(), :user, 'memory.created', '{}', :status, now() - interval '9 days',"
            " CASE WHEN :status = 'delivered' THEN now() - CAST(CAST(:ago AS text) AS interval) "
            "END) RETURNING id"
        )
        hooks = {"subscription": subscription}
        rows["webhook_deliveries"] = {
            "due": [
                *await ids(delivery, status="delivered", ago="3 days", **hooks),
                *await ids(delivery, status="delivered", ago="50 hours", **hooks),
            ],
            "kept": [
                *await ids(delivery, status="delivered", ago="1 day", **hooks),
                # Not delivered, whatever their age: pending (retrying) and dead ones stay.
                *await ids(delivery, status="pending", ago="9 days", **hooks),
                *await ids(delivery, status="dead", ago="9 days", **hooks),
            ],
        }
        # Each with its attempt log, which goes with its delivery.
        await connection.execute(
            text(
                "INSERT INTO webhook_attempts (delivery_id, status_code, duration_ms) "
                "SELECT id, 200, 5 FROM webhook_deliveries WHERE subscription_id = "
                "CAST(:subscription AS uuid)"
            ),
            hooks,
        )

        login = (
            "INSERT INTO console_sessions (id, sealed_key, expires_at) "
            "VALUES (sha256(CAST(CAST(gen_random_uuid() AS text) AS bytea)), '\\x00', "
            "now() + CAST(CAST(:left AS text) AS interval)) RETURNING encode(id, 'hex')"
        )
        rows["console_sessions"] = {
            "due": await ids(login, left="-1 second"),
            "kept": await ids(login, left="1 hour"),
        }

        erasure = (
            "INSERT INTO user_erasures (user_id, erased_at, writes_refused_until) "
            "VALUES (:who, now(), now() + CAST(CAST(:left AS text) AS interval)) RETURNING user_id"
        )
        rows["user_erasures"] = {
            "due": await ids(erasure, who=f"{user_id}-gone", left="-1 second"),
            "kept": await ids(erasure, who=f"{user_id}-blocked", left="1 hour"),
        }
    return rows


KEY_COLUMNS = {
    "outbox": ("id", "bigint"),
    "idempotency_keys": ("key", "text"),
    "ingest_tasks": ("message_id", "uuid"),
    "batch_jobs": ("id", "uuid"),
    "webhook_deliveries": ("id", "bigint"),
    "console_sessions": ("encode(id, 'hex')", "text"),
    "user_erasures": ("user_id", "text"),
}


async def _present(db: AsyncEngine, table: str, ids: list[str]) -> set[str]:
    column, kind = KEY_COLUMNS[table]
    query = f"SELECT {column}::text FROM {table} WHERE {column} = ANY(CAST(:ids AS {kind}[]))"  # noqa: S608
    async with db.connect() as connection:
        found = await connection.execute(
            text(query), {"ids": [int(i) for i in ids] if kind == "bigint" else ids}
        )
        return set(found.scalars())


async def test_each_table_loses_exactly_its_due_rows_in_batches(
    db: AsyncEngine, inprocess_api: InProcessApi, user_id: str
) -> None:
    rows = await _seed(db, user_id)
    before = {p.table: RETENTION_PURGED.labels(table=p.table)._value.get() for p in POLICIES}
    # Batches of 2: the outbox's 5 due rows take three, each its own transaction.
    job = _job(inprocess_api, retention_batch_size=2)
    due = await job.due()
    for table, seeded in rows.items():
        assert due[table] >= len(seeded["due"]), (table, due)
    # What /metrics reports: the seeded jobs and tasks have been due for a day.
    async with job_session(inprocess_api) as session:
        overdue = await overdue_seconds(session, job._retention)
    assert overdue["batch_jobs"] >= 86_000 and overdue["ingest_tasks"] >= 86_000, overdue
    assert overdue["outbox"] >= 3000, overdue

    purged = await job.run_once()

    for table, seeded in rows.items():
        assert await _present(db, table, seeded["due"]) == set(), table
        assert await _present(db, table, seeded["kept"]) == set(seeded["kept"]), table
        # Other tests' rows may have been due too: at least ours, and the counter agrees.
        assert purged[table] >= len(seeded["due"]), (table, purged)
        counted = RETENTION_PURGED.labels(table=table)._value.get() - before[table]
        assert counted == purged[table], table
    # A delivery's attempt log went with it; the kept ones keep theirs.
    async with db.connect() as connection:
        logged = await connection.execute(
            text(
                "SELECT delivery_id::text FROM webhook_attempts "
                "WHERE delivery_id = ANY(CAST(:ids AS bigint[]))"
            ),
            {
                "ids": [
                    int(i)
                    for i in rows["webhook_deliveries"]["due"] + rows["webhook_deliveries"]["kept"]
                ]
            },
        )
        assert set(logged.scalars()) == set(rows["webhook_deliveries"]["kept"])
    # Nothing is left due, and nothing is reported overdue.
    assert (await job.due())["batch_jobs"] == 0
    async with job_session(inprocess_api) as session:
        overdue = await overdue_seconds(session, job._retention)
    assert overdue["batch_jobs"] == overdue["ingest_tasks"] == overdue["outbox"] == 0, overdue


async def test_a_table_kept_forever_loses_nothing(
    db: AsyncEngine, inprocess_api: InProcessApi, user_id: str
) -> None:
    rows = await _seed(db, user_id)
    job = _job(inprocess_api, ingest_task_retention_days=0.0, batch_job_retention_days=0.0)
    purged = await job.run_once()
    assert purged["ingest_tasks"] == purged["batch_jobs"] == 0
    for table in ("ingest_tasks", "batch_jobs"):
        assert await _present(db, table, rows[table]["due"]) == set(rows[table]["due"])
    assert await _present(db, "outbox", rows["outbox"]["due"]) == set()


@pytest.mark.parametrize("policy", [p for p in POLICIES if p.index], ids=lambda p: p.table)
async def test_a_batch_finds_its_rows_through_its_index(owner: AsyncEngine, policy) -> None:
    """The batch can find its rows through the policy's partial index (its predicate implies
    the index's): with sequential scans priced out, the plan scans the index, nothing else."""
    async with owner.connect() as connection:
        await connection.execute(text("SET LOCAL enable_seqscan = off"))
        plan = await connection.execute(
            text(f"EXPLAIN {policy.delete_batch()}"), {"limit": 1000, "age_s": 3600.0}
        )
        lines = "\n".join(plan.scalars())
        await connection.rollback()
    # "Index Scan using ...", or "Bitmap Index Scan on ..." on a small table.
    assert policy.index in lines, lines
    assert "Seq Scan" not in lines, lines


def test_a_finished_job_outlives_the_key_that_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COGNIS_DATABASE_URL", "postgresql+asyncpg://u:p@127.0.0.1:1/db")
    monkeypatch.setenv("COGNIS_IDEMPOTENCY_TTL_S", str(3 * 86_400))
    monkeypatch.setenv("COGNIS_BATCH_JOB_RETENTION_DAYS", "2")
    with pytest.raises(ValueError, match="COGNIS_BATCH_JOB_RETENTION_DAYS must be 0"):
        Settings()  # type: ignore[call-arg]
    monkeypatch.setenv("COGNIS_BATCH_JOB_RETENTION_DAYS", "0")  # forever
    monkeypatch.setenv("COGNIS_INGEST_TASK_RETENTION_DAYS", "3")
    settings = Settings()  # type: ignore[call-arg]
    assert (
        settings.retention.batch_job_retention_days,
        settings.retention.ingest_task_retention_days,
    ) == (0, 3)


async def test_the_command_counts_then_deletes(
    db: AsyncEngine, migrated: dict[str, str], user_id: str
) -> None:
    rows = await _seed(db, user_id)
    env = {**migrated, "COGNIS_BATCH_JOB_RETENTION_DAYS": "2"}
    counted = await run_cli_async(env, "app", "retention", "--dry-run")
    assert counted.returncode == 0, counted.stderr[-2000:]
    due = dict(line.split(": ", 1) for line in counted.stdout.splitlines())
    assert int(due["batch_jobs"].split()[0]) >= 2, counted.stdout
    assert await _present(db, "batch_jobs", rows["batch_jobs"]["due"]) == set(
        rows["batch_jobs"]["due"]
    )

    deleted = await run_cli_async(env, "app", "retention")
    assert deleted.returncode == 0, deleted.stderr[-2000:]
    assert "batch_jobs: " in deleted.stdout and "rows deleted" in deleted.stdout
    assert await _present(db, "batch_jobs", rows["batch_jobs"]["due"]) == set()
    assert await _present(db, "batch_jobs", rows["batch_jobs"]["kept"]) == set(
        rows["batch_jobs"]["kept"]
    )
