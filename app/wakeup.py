"""The idle wait of the background loops (outbox relay, ingestion worker)."""

from __future__ import annotations

import asyncio


async def sleep_until_woken(wake: asyncio.Event, stop: asyncio.Event, poll_s: float) -> None:
    """Return when `wake` (a NOTIFY arrived) or `stop` is set, or after `poll_s` (polling)."""
    waiters = [asyncio.create_task(wake.wait()), asyncio.create_task(stop.wait())]
    await asyncio.wait(waiters, timeout=poll_s, return_when=asyncio.FIRST_COMPLETED)
    for waiter in waiters:
        waiter.cancel()
