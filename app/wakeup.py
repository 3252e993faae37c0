"""The idle wait of the background loops (outbox relay, ingestion and batch job workers), the
loop of a worker that polls a queue, and the heartbeat of its leased claims."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable

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
    beat: Callable[[], None] | None = None,
) -> None:
    """Run `run_once` (False: nothing was due) until `stop` is set: at once again after work,
    else when woken or after `poll_s`. An error (the database away) is logged as `error_event`
    and the loop goes on. `beat` (app/heartbeat.py) is called every time round: a `run_once`
    that never returns stops it."""
    while not stop.is_set():
        if beat is not None:
            beat()
        # Cleared before looking for work, so a wake-up that arrives meanwhile is not lost.
        wake.clear()
        try:
            if await run_once():
                continue
        except Exception as exc:
            log.exception(error_event, error=str(exc))
        await sleep_until_woken(wake, stop, poll_s)


@contextlib.asynccontextmanager
async def renewing_lease(
    renew: Callable[[], Awaitable[bool]], heartbeat_s: float, events: str, **ids: str
) -> AsyncIterator[None]:
    """A heartbeat while the block works on a leased claim: `renew` every `heartbeat_s` until
    it answers False (the claim is no longer ours: `<events>.lease_not_renewed`). A failed
    renewal (the database away) is logged (`<events>.lease_renewal_failed`) and retried at the
    next beat; the final write checks ownership anyway."""

    async def beat() -> None:
        while True:
            await asyncio.sleep(heartbeat_s)
            try:
                renewed = await renew()
            except Exception as exc:
                log.warning(f"{events}.lease_renewal_failed", **ids, error=str(exc))
                continue
            if not renewed:
                log.warning(f"{events}.lease_not_renewed", **ids)
                return

    heartbeat = asyncio.create_task(beat())
    try:
        yield
    finally:
        heartbeat.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await heartbeat
