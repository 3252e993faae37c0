"""The idle wait of the background loops (outbox relay, ingestion and batch job workers), and
the loop of a worker that polls a queue."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import structlog

log = structlog.get_logger(__name__)


async def sleep_until_woken(wake: asyncio.Event, stop: asyncio.Event, poll_s: float) -> None:
    """Return when `wake` (a NOTIFY arrived) or `stop` is set, or after `poll_s` (polling)."""
    waiters = [asyncio.create_task(wake.wait()), asyncio.create_task(stop.wait())]
    await asyncio.wait(waiters, timeout=poll_s, return_when=asyncio.FIRST_COMPLETED)
    for waiter in waiters:
        waiter.cancel()


async def work_until_stopped(
    run_once: Callable[[], Awaitable[bool]],
    wake: asyncio.Event,
    stop: asyncio.Event,
    poll_s: float,
    error_event: str,
) -> None:
    """Run `run_once` (False: nothing was due) until `stop` is set: at once again after work,
    else when woken or after `poll_s`. An error (the database away) is logged as `error_event`
    and the loop goes on."""
    while not stop.is_set():
        # Cleared before looking for work, so a wake-up that arrives meanwhile is not lost.
        wake.clear()
        try:
            if await run_once():
                continue
        except Exception as exc:
            log.exception(error_event, error=str(exc))
        await sleep_until_woken(wake, stop, poll_s)
