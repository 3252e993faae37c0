"""LISTEN for the background loops (the outbox relay, the webhook dispatcher): a NOTIFY on a
channel wakes the loop at once; polling stays the fallback, so a lost notification only costs
one poll interval."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import asyncpg
import structlog
from sqlalchemy.engine import make_url

from app.config import StoreSettings

log = structlog.get_logger(__name__)


def asyncpg_dsn(sqlalchemy_url: str) -> str:
    return (
        make_url(sqlalchemy_url).set(drivername="postgresql").render_as_string(hide_password=False)
    )


async def _listen_until_lost(
    store: StoreSettings, channel: str, wake: asyncio.Event, events: str
) -> None:
    """One connection's life: `wake` set on each NOTIFY until the connection is lost (or the
    caller is cancelled); returns at once when it cannot be opened."""
    try:
        direct = store.direct_database_url or store.database_url
        connection = await asyncpg.connect(asyncpg_dsn(direct.get_secret_value()))
        await connection.add_listener(channel, lambda *_: wake.set())
    except (OSError, asyncpg.PostgresError) as exc:
        log.warning(f"{events}.listen_failed", error=str(exc))
        return
    lost = asyncio.Event()
    connection.add_termination_listener(lambda *_: lost.set())
    try:
        wake.set()  # what was sent while nobody listened is looked for now
        await lost.wait()
        log.warning(f"{events}.listen_lost")
    finally:
        if not connection.is_closed():
            with contextlib.suppress(Exception):
                await connection.close()


@contextlib.asynccontextmanager
async def listening(
    store: StoreSettings, retry_s: float, channel: str, wake: asyncio.Event, events: str
) -> AsyncIterator[None]:
    """While the block runs, every NOTIFY on `channel` sets `wake`. Heard on a connection of
    its own to Postgres itself (COGNIS_DIRECT_DATABASE_URL: through a transaction-mode pooler
    it would hear nothing); one refused or lost is logged (`<events>.listen_failed`,
    `<events>.listen_lost`) and opened again after `retry_s` (COGNIS_RELAY_POLL_INTERVAL_S),
    the loop polling meanwhile."""

    async def keep_listening() -> None:
        while True:
            await _listen_until_lost(store, channel, wake, events)
            await asyncio.sleep(retry_s)

    task = asyncio.create_task(keep_listening())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
