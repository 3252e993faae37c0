"""The dispatcher: claims due webhook deliveries (FOR UPDATE SKIP LOCKED, across tenants on
the background role, like the outbox relay), POSTs each signed, and records every attempt.
Per subscription and user, a delivery waits while an earlier one is pending, so a receiver
sees one user's events in order; a failure backs off exponentially and, after
COGNIS_WEBHOOK_MAX_ATTEMPTS, leaves the delivery dead (redelivered on request)."""

from __future__ import annotations

import asyncio
import json
import random
import time
from dataclasses import dataclass
from datetime import timedelta

import httpx
import structlog
from sqlalchemy import func, insert, select, text, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.config import RelaySettings, StoreSettings
from app.db.models import WebhookAttempt, WebhookDelivery, WebhookSubscription
from app.db.notifications import listening
from app.wakeup import work_until_stopped
from app.webhooks.signing import sign
from app.webhooks.transport import webhook_client

log = structlog.get_logger(__name__)

# Notified by a statement that queued deliveries (0036_webhook_dispatch's trigger).
WEBHOOK_CHANNEL = "cognis_webhooks"

_DUE = text(
    """
    SELECT d.id FROM webhook_deliveries AS d
    WHERE d.status = 'pending' AND d.next_attempt_at <= now()
      AND NOT EXISTS (
        SELECT 1 FROM webhook_deliveries AS e
        WHERE e.subscription_id = d.subscription_id AND e.user_id = d.user_id
          AND e.status = 'pending' AND e.id < d.id
      )
    ORDER BY d.id
    LIMIT :limit
    FOR UPDATE SKIP LOCKED
    """
)


@dataclass
class Outcome:
    status_code: int | None
    error: str | None
    duration_ms: int

    @property
    def ok(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


def body_of(delivery: WebhookDelivery) -> bytes:
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
        batch_size: int = 50,
    ) -> None:
        self._sessionmaker = sessionmaker
        self._relay = relay
        self._store = store
        self._batch_size = batch_size
        self.wake = asyncio.Event()
        self._clients: dict[bool, httpx.AsyncClient] = {}

    def backoff(self, attempts: int) -> timedelta:
        base = self._relay.webhook_backoff_base_s * (2 ** min(attempts - 1, 20))
        capped = min(base, self._relay.relay_backoff_max_s)
        return timedelta(seconds=capped * random.uniform(0.5, 1.0))

    async def _post(
        self,
        client: httpx.AsyncClient,
        subscription: WebhookSubscription,
        delivery: WebhookDelivery,
    ) -> Outcome:
        body = body_of(delivery)
        timestamp = int(time.time())
        event_id = str(delivery.event_id)
        headers = {
            "content-type": "application/json",
            "webhook-id": event_id,
            "webhook-timestamp": str(timestamp),
            "webhook-signature": sign(subscription.secret, event_id, timestamp, body),
        }
        started = time.perf_counter()
        deadline = self._relay.webhook_timeout_s
        try:
            # httpx's timeout bounds each read, not the request: a receiver that trickles its
            # answer a byte at a time would hold the POST for ever. This bounds the whole of it.
            async with asyncio.timeout(deadline):
                response = await client.post(subscription.url, content=body, headers=headers)
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
        receiver kept alive from one batch to the next (closed when the loop stops). Unless
        the operator allows private receivers, its connections go to checked global addresses
        only (app/webhooks/transport.py); the setting is read at each batch."""
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

    async def run_once(self) -> bool:
        """Claim one batch of due deliveries, POST them, record the outcomes. One transaction:
        the rows stay locked while their POSTs are in flight."""
        async with self._sessionmaker() as session, session.begin():
            ids = list((await session.scalars(_DUE, {"limit": self._batch_size})).all())
            if not ids:
                return False
            deliveries = list(
                await session.scalars(select(WebhookDelivery).where(WebhookDelivery.id.in_(ids)))
            )
            subscriptions = {
                s.id: s
                for s in await session.scalars(
                    select(WebhookSubscription).where(
                        WebhookSubscription.id.in_({d.subscription_id for d in deliveries})
                    )
                )
            }
            client = self._http()
            outcomes = await asyncio.gather(
                *(self._post(client, subscriptions[d.subscription_id], d) for d in deliveries)
            )
            await self._record(session, deliveries, outcomes)
            return True

    async def _record(
        self, session: AsyncSession, deliveries: list[WebhookDelivery], outcomes: list[Outcome]
    ) -> None:
        """Every attempt logged in one statement, the delivered rows marked in one more; a
        failure is scheduled again (or dead) one by one."""
        await session.execute(
            insert(WebhookAttempt),
            [
                {
                    "tenant_id": d.tenant_id,
                    "delivery_id": d.id,
                    "status_code": o.status_code,
                    "error": o.error,
                    "duration_ms": o.duration_ms,
                }
                for d, o in zip(deliveries, outcomes, strict=True)
            ],
        )
        delivered = [d.id for d, o in zip(deliveries, outcomes, strict=True) if o.ok]
        if delivered:
            await session.execute(
                update(WebhookDelivery)
                .where(WebhookDelivery.id.in_(delivered))
                .values(
                    status="delivered",
                    attempts=WebhookDelivery.attempts + 1,
                    delivered_at=func.clock_timestamp(),
                )
            )
        for delivery, outcome in zip(deliveries, outcomes, strict=True):
            if outcome.ok:
                continue
            attempts = delivery.attempts + 1
            values: dict[str, object] = {"attempts": attempts}
            if attempts >= self._relay.webhook_max_attempts:
                values.update(status="dead")
                log.warning("webhooks.dead", delivery_id=delivery.id, error=outcome.error)
            else:
                values.update(next_attempt_at=func.now() + self.backoff(attempts))
            await session.execute(
                update(WebhookDelivery).where(WebhookDelivery.id == delivery.id).values(**values)
            )

    async def run_forever(self, stop: asyncio.Event) -> None:
        """Until `stop` is set: woken by the NOTIFY of each statement that queues deliveries
        (0036_webhook_dispatch), polling every COGNIS_RELAY_POLL_INTERVAL_S as the fallback
        (and for retries coming due)."""
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
                    self.run_once,
                    self.wake,
                    stop,
                    self._relay.relay_poll_interval_s,
                    "webhooks.dispatch_error",
                )
        finally:
            await self.close()
        log.info("webhooks.dispatcher_stopped")
