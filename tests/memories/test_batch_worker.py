"""The batch job worker across processes: a job whose worker process dies while it runs it is
taken again once its lease runs out, and written once.

The dying worker is `python -m app worker` whose embedding server never answers (a socket that
accepts and stays silent), so it is certainly mid-job when it is killed (SIGKILL: no
clean-up of any kind); the job is then finished by this process's worker."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import uuid
from collections.abc import AsyncIterator

import httpx
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.conftest import InProcessApi, ServiceProcess, wait_until
from tests.factories import (
    BATCH_COUNTS,
    finished_batch_job,
    queued_batch_job,
    running_batch_worker,
    short_batch,
)

LEASE_S = 3


@contextlib.asynccontextmanager
async def silent_server() -> AsyncIterator[str]:
    """A URL whose server accepts connections and never answers."""
    held: list[asyncio.StreamWriter] = []

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        for writer in held:
            writer.close()
        server.close()
        await server.wait_closed()


async def move_to_queue(db: AsyncEngine, job_id: str, queue: str) -> None:
    async with db.begin() as conn:
        await conn.execute(
            text("UPDATE batch_jobs SET queue = :q WHERE id = :id"), {"q": queue, "id": job_id}
        )


async def test_a_job_whose_worker_died_mid_run_is_written_later_once(
    client: httpx.AsyncClient,
    inprocess_api: InProcessApi,
    migrated: dict[str, str],
    db: AsyncEngine,
    slow_estimate: None,
    user_id: str,
) -> None:
    accepted = await queued_batch_job(client, user_id, "Kai")
    job_id = accepted.json()["job_id"]
    # On a queue of this test's own while the doomed worker runs: no other process of the
    # session (their workers work their own queues) can take the job before it.
    dying_queue = f"batch-worker-dies-{uuid.uuid4().hex[:8]}"
    await move_to_queue(db, job_id, dying_queue)

    async def job_row() -> tuple:
        async with db.connect() as conn:
            return (
                await conn.execute(
                    text(
                        "SELECT status, attempts, lease_expires_at > now() AS leased"
                        " FROM batch_jobs WHERE id = :id"
                    ),
                    {"id": job_id},
                )
            ).one()

    async with silent_server() as embedder_url:
        env = {
            **migrated,
            "COGNIS_EMBEDDING_HTTP_URL": embedder_url,
            "COGNIS_INGEST_LEASE_S": str(LEASE_S),
            "COGNIS_INGEST_HEARTBEAT_S": "1",
            "COGNIS_INGEST_POLL_INTERVAL_S": "0.2",
            "COGNIS_INGEST_QUEUE": dying_queue,
        }
        worker = ServiceProcess(env, "batch-worker-dies", "worker")
        try:

            async def running_there() -> bool:
                row = await job_row()
                return row.status == "running" and row.attempts == 1

            await wait_until(running_there, timeout=120)
            # Held past several leases by its heartbeat: the process is alive and working.
            await asyncio.sleep(LEASE_S + 1)
            assert tuple(await job_row()) == ("running", 1, True)
            worker.process.send_signal(signal.SIGKILL)
            await asyncio.to_thread(worker.process.wait, 30)
        finally:
            worker.stop()
    async with db.connect() as conn:
        assert tuple(await conn.execute(BATCH_COUNTS, {"u": user_id})) == ((0, 0, 1),)

    # Its lease runs out (nobody renews it) and this process's worker takes it again.
    await move_to_queue(db, job_id, inprocess_api.app.state.runtime.settings.ingest.ingest_queue)
    async with running_batch_worker(inprocess_api.app.state.runtime):
        done = await finished_batch_job(client, accepted.headers["location"], within_s=120)
    assert (done["status"], done["attempts"], done["error"]) == ("done", 2, None), done
    assert [m["content"] for m in done["items"]] == [m["content"] for m in short_batch("Kai")]
    async with db.connect() as conn:
        assert tuple(await conn.execute(BATCH_COUNTS, {"u": user_id})) == ((12, 12, 1),)
