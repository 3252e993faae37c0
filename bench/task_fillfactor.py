"""HOT updates of ingest_tasks per fillfactor: a replay of the ingestion worker's updates
(app/ingest/repository.py) on a scratch database (created by the owner, migrated to head,
dropped at the end).

Per fillfactor: --users users' --tasks tasks each are queued (a message and a task per
message), then taken in batches of 10 of one user, round robin, each batch with the worker's
four statements, each its own transaction as the worker's are: the claim (state running, a
lease), a lease renewal (the heartbeat), the finish (state done) and the move of the user's
next queued task to the back. Only the renewal and the move can be HOT (the claim and the
finish change `state`, the predicate column of two partial indexes); printed: updates, HOT
updates, their share of all and of those that could be, and the table's size afterwards.
Prints numbers; asserts nothing.

    make bench-task-fillfactor BENCH_ARGS="--fillfactors 100,90,80"
"""

from __future__ import annotations

import argparse
import sys
import uuid

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from app.config import Settings
from app.db.tenant import DEFAULT_TENANT_ID
from app.logging import configure_logging
from bench.database import measure_in_scratch_database, owner_engine

STATS = text(
    "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'ingest_tasks'"
)
CLAIM = text(
    "UPDATE ingest_tasks SET state = 'running', lease_token = :token,"
    " lease_expires_at = now() + interval '1 min', attempts = attempts + 1"
    " WHERE message_id IN (SELECT message_id FROM ingest_tasks WHERE user_id = :u"
    " AND state = 'queued' ORDER BY sent_at, message_id LIMIT 10)"
)
RENEW = text(
    "UPDATE ingest_tasks SET lease_expires_at = now() + interval '2 min'"
    " WHERE lease_token = :token AND state = 'running'"
)
FINISH = text(
    "UPDATE ingest_tasks SET state = 'done', finished_at = now(), lease_token = NULL,"
    " last_error = NULL WHERE lease_token = :token"
)
TO_BACK = text(
    "UPDATE ingest_tasks SET available_at = greatest(available_at, now())"
    " WHERE message_id = (SELECT message_id FROM ingest_tasks WHERE user_id = :u"
    " AND state = 'queued' ORDER BY sent_at, message_id LIMIT 1)"
)


async def stats(connection: AsyncConnection) -> tuple[int, int]:
    await connection.execute(text("SELECT pg_stat_force_next_flush()"))
    await connection.execute(text("SELECT pg_sleep(1.5)"))  # the flush is asynchronous
    row = (await connection.execute(STATS)).one()
    return int(row[0]), int(row[1])


async def replay(connection: AsyncConnection, fillfactor: int, users: int, tasks: int) -> str:
    for sql in (
        "DELETE FROM messages",
        f"ALTER TABLE ingest_tasks SET (fillfactor = {int(fillfactor)})",
        "VACUUM FULL ingest_tasks",
        "INSERT INTO messages (id, user_id, content, sent_at) SELECT md5(u || ':' || k)::uuid,"
        " 'u' || u, 'hello', now() + k * interval '1 s'"
        f" FROM generate_series(1, {int(users)}) u, generate_series(1, {int(tasks)}) k",
        "INSERT INTO ingest_tasks (message_id, job_id, user_id, sent_at)"
        " SELECT id, id, user_id, sent_at FROM messages",
        "VACUUM ANALYZE ingest_tasks",
    ):
        await connection.execute(text(sql))
    updates0, hot0 = await stats(connection)
    for batch in range(users * tasks // 10):
        params = {"u": f"u{batch % users + 1}", "token": uuid.uuid4()}
        for statement in (CLAIM, RENEW, FINISH, TO_BACK):
            await connection.execute(statement, params)
    updates1, hot1 = await stats(connection)
    updates, hot = updates1 - updates0, hot1 - hot0
    size: int = (
        await connection.execute(text("SELECT pg_relation_size('ingest_tasks')"))
    ).scalar_one()
    could = updates - 2 * users * tasks  # every task's claim and finish cannot be HOT
    return (
        f"| {fillfactor} | {updates:,} | {hot:,} | {100 * hot / updates:.1f} %"
        f" | {100 * hot / max(could, 1):.0f} % | {size // 1024:,} kB |"
    )


async def measure(settings: Settings, args: argparse.Namespace) -> None:
    owner = owner_engine(settings)
    try:
        async with owner.connect() as connection:
            await connection.execution_options(isolation_level="AUTOCOMMIT")
            await connection.execute(
                text("SELECT set_config('cognis.tenant_id', :t, false)"),
                {"t": str(DEFAULT_TENANT_ID)},
            )
            print(
                "| fillfactor | updates | HOT | of all | of those that could be | size after |"
                "\n|---:|---:|---:|---:|---:|---:|"
            )
            for fillfactor in args.fillfactors:
                print(await replay(connection, fillfactor, args.users, args.tasks), flush=True)
    finally:
        await owner.dispose()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=100)
    parser.add_argument("--tasks", type=int, default=50, help="per user")
    parser.add_argument(
        "--fillfactors", type=lambda s: [int(x) for x in s.split(",")], default=[100, 90, 80]
    )
    parser.add_argument("--database", help="scratch database name (default: a new one)")
    args = parser.parse_args()
    configure_logging("WARNING", False)
    name = args.database or f"cognis_bench_task_fillfactor_{uuid.uuid4().hex[:8]}"
    return measure_in_scratch_database(
        Settings(), name, lambda settings, _: measure(settings, args)
    )


if __name__ == "__main__":
    sys.exit(main())
