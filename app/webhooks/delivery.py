"""The dispatcher: leases due webhook deliveries (across tenants on the background role, like
the outbox relay; app/webhooks/claims.py), POSTs each signed, and records each attempt as
soon as its own POST ends. Per subscription and user, a delivery waits while an earlier one
is pending, so a receiver sees one user's events in order; a failure backs off exponentially
and, after COGNIS_WEBHOOK_MAX_ATTEMPTS, leaves the delivery dead (redelivered on request).

Tenants cannot hold each other's events: every POST ends at COGNIS_WEBHOOK_TIMEOUT_S (the
whole request), a tenant has at most COGNIS_WEBHOOK_TENANT_CONCURRENCY POSTs in flight in
one dispatcher, claims go round-robin across tenants, and a freed slot is filled at once
(not when a batch's slowest POST ends)."""

from __future__ import annotations

import asyncio
import json
import random
import time
import uuid
from dataclasses import dataclass
from datetime import timedelta

import httpx
import structlog
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.config import RelaySettings, StoreSettings
from app.db.notifications import listening
from app.db.tenant import tenant_scope
from app.wakeup import work_until_stopped
from app.webhooks.claims import ClaimedDelivery, claim_due, record_attempt
from app.webhooks.signing import sign
from app.webhooks.transport import webhook_client

log = structlog.get_logger(__name__)

# Notified by a statement that queued deliveries (0036_webhook_dispatch's trigger).
WEBHOOK_CHANNEL = "cognis_webhooks"

# How long past its POST's deadline a claim stays leased: time to record the outcome. A
# dispatcher that died mid-POST leaves the delivery due again after deadline + this.
LEASE_MARGIN = timedelta(seconds=10)


@dataclass
class Outcome:
    status_code: int | None
    error: str | None
    duration_ms: int

    @property
    def ok(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


def body_of(delivery: ClaimedDelivery) -> bytes:
    return json.dumps(
        {
            "id": str(delivery.event_id),
            "type": delivery.type,
            "created_at": delivery.created_at.isoformat(),
            "data": delivery.payload,
        },
        separators=(",", ":"),
    ).encode()


class WebhookDispatcher:
    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        relay: RelaySettings,
        store: StoreSettings,
    ) -> None:
        self._sessionmaker = sessionmaker
        self._relay = relay
        self._store = store
        self.wake = asyncio.Event()
        self._clients: dict[bool, httpx.AsyncClient] = {}
        # POSTs in flight per tenant, and the tasks of those the loop started.
        self._in_flight: dict[uuid.UUID, int] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def in_flight(self) -> int:
        """POSTs of this dispatcher in flight now, all tenants together."""
        return sum(self._in_flight.values())

    def backoff(self, attempts: int) -> timedelta:
        base = self._relay.webhook_backoff_base_s * (2 ** min(attempts - 1, 20))
        capped = min(base, self._relay.relay_backoff_max_s)
        return timedelta(seconds=capped * random.uniform(0.5, 1.0))

    async def _post(self, client: httpx.AsyncClient, delivery: ClaimedDelivery) -> Outcome:
        body = body_of(delivery)
        timestamp = int(time.time())
        event_id = str(delivery.event_id)
        headers = {
            "content-type": "application/json",
            "webhook-id": event_id,
            "webhook-timestamp": str(timestamp),
            "webhook-signature": sign(delivery.secret, event_id, timestamp, body),
        }
        started = time.perf_counter()
        deadline = self._relay.webhook_timeout_s
        try:
            # httpx's timeout bounds each read, not the request: a receiver that trickles its
            # answer a byte at a time would hold the POST for ever. This bounds the whole of it.
            async with asyncio.timeout(deadline):
                response = await client.post(delivery.url, content=body, headers=headers)
        except TimeoutError:
            elapsed = int((time.perf_counter() - started) * 1000)
            return Outcome(None, f"Timeout: no whole answer within {deadline} s", elapsed)
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            elapsed = int((time.perf_counter() - started) * 1000)
            return Outcome(None, f"{type(exc).__name__}: {exc}"[:500], elapsed)
        elapsed = int((time.perf_counter() - started) * 1000)
        error = None if 200 <= response.status_code < 300 else f"HTTP {response.status_code}"
        return Outcome(response.status_code, error, elapsed)

    def _http(self) -> httpx.AsyncClient:
        """One client for the dispatcher's life: the CA bundle loaded once, connections to a
        receiver kept alive from one POST to the next (closed when the loop stops). Unless
        the operator allows private receivers, its connections go to checked global addresses
        only (app/webhooks/transport.py); the setting is read at each claim."""
        allow_private = self._relay.webhook_allow_private
        if allow_private not in self._clients:
            self._clients[allow_private] = webhook_client(
                timeout_s=self._relay.webhook_timeout_s, allow_private=allow_private
            )
        return self._clients[allow_private]

    async def close(self) -> None:
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            await client.aclose()

    async def _claim(self) -> list[ClaimedDelivery]:
        """Lease what the free slots allow (one short transaction), and count it in flight."""
        free = self._relay.webhook_concurrency - self.in_flight
        if free <= 0:
            return []
        # Across tenants, whichever task calls (a test's, bound to the tenant it acts as).
        with tenant_scope(None):
            async with self._sessionmaker() as session, session.begin():
                claimed = await claim_due(
                    session,
                    limit=free,
                    per_tenant=self._relay.webhook_tenant_concurrency,
                    in_flight=dict(self._in_flight),
                    lease=timedelta(seconds=self._relay.webhook_timeout_s) + LEASE_MARGIN,
                )
        for delivery in claimed:
            self._in_flight[delivery.tenant_id] = self._in_flight.get(delivery.tenant_id, 0) + 1
        return claimed

    async def _deliver(self, client: httpx.AsyncClient, delivery: ClaimedDelivery) -> None:
        """POST one claimed delivery and record its outcome at once, in a transaction of its
        own; then free its tenant's slot and wake the loop to fill it."""
        try:
            outcome = await self._post(client, delivery)
            with tenant_scope(None):
                async with self._sessionmaker() as session, session.begin():
                    status = await record_attempt(
                        session,
                        delivery,
                        status_code=outcome.status_code,
                        error=outcome.error,
                        duration_ms=outcome.duration_ms,
                        max_attempts=self._relay.webhook_max_attempts,
                        backoff=self.backoff(delivery.attempts + 1),
                    )
            if status == "dead":
                log.warning("webhooks.dead", delivery_id=delivery.id, error=outcome.error)
        except Exception as exc:
            # The database away: the lease runs out and the delivery is due again.
            log.exception("webhooks.record_failed", delivery_id=delivery.id, error=str(exc))
        finally:
            left = self._in_flight[delivery.tenant_id] - 1
            if left:
                self._in_flight[delivery.tenant_id] = left
            else:
                del self._in_flight[delivery.tenant_id]
            self.wake.set()

    async def run_once(self) -> bool:
        """Claim what is due (within the free slots), POST it, record each outcome as its POST
        ends; return when all of those are recorded. False: nothing was due."""
        claimed = await self._claim()
        if not claimed:
            return False
        client = self._http()
        await asyncio.gather(*(self._deliver(client, d) for d in claimed))
        return True

    async def _start_due(self) -> bool:
        """The loop's step: claim what is due and start each POST in a task of its own,
        without waiting for any. False: nothing was claimed (none due, or no free slot)."""
        claimed = await self._claim()
        client = self._http() if claimed else None
        for delivery in claimed:
            assert client is not None
            task = asyncio.create_task(self._deliver(client, delivery))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return bool(claimed)

    async def run_forever(self, stop: asyncio.Event) -> None:
        """Until `stop` is set: woken by the NOTIFY of each statement that queues deliveries
        (0036_webhook_dispatch) and by each POST that ends (its slot is free), polling every
        COGNIS_RELAY_POLL_INTERVAL_S as the fallback (and for retries coming due). POSTs in
        flight when it stops are cancelled: their leases run out and they are sent again."""
        log.info("webhooks.dispatcher_started")
        try:
            async with listening(
                self._store,
                self._relay.relay_poll_interval_s,
                WEBHOOK_CHANNEL,
                self.wake,
                "webhooks",
            ):
                await work_until_stopped(
                    self._start_due,
                    self.wake,
                    stop,
                    self._relay.relay_poll_interval_s,
                    "webhooks.dispatch_error",
                )
        finally:
            tasks = list(self._tasks)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await self.close()
        log.info("webhooks.dispatcher_stopped")
