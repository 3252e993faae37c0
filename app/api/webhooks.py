"""Webhook subscriptions (issue 44; docs/webhooks.md): a tenant's receivers, their delivery
log and redelivery, scoped by the API key like every other route."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from litestar import Controller, delete, get, post
from litestar.params import Parameter
from sqlalchemy.ext.asyncio import AsyncSession

from app.api.contract import COMMON, WITH_BODY, problems
from app.api.schemas.webhooks import (
    AttemptOut,
    DeliveryList,
    DeliveryOut,
    WebhookCreate,
    WebhookList,
    WebhookOut,
)
from app.errors import NotFoundError
from app.runtime import Runtime
from app.webhooks import subscriptions


def _delivery_out(delivery: Any, log: list[Any]) -> DeliveryOut:
    return DeliveryOut(
        id=delivery.id,
        event_id=delivery.event_id,
        type=delivery.type,
        user_id=delivery.user_id,
        status=delivery.status,
        attempts=delivery.attempts,
        created_at=delivery.created_at,
        delivered_at=delivery.delivered_at,
        next_attempt_at=delivery.next_attempt_at,
        payload=delivery.payload,
        log=[
            AttemptOut(
                attempted_at=a.attempted_at,
                status_code=a.status_code,
                error=a.error,
                duration_ms=a.duration_ms,
            )
            for a in log
        ],
    )


async def _subscription(db_session: AsyncSession, webhook_id: uuid.UUID) -> Any:
    found = await subscriptions.one(db_session, webhook_id)
    if found is None:
        raise NotFoundError(f"no webhook {webhook_id} in this tenant")
    return found


class WebhookController(Controller):
    path = "/v1/webhooks"
    tags = ["webhooks"]

    @post("/", summary="Subscribe a receiver to events", responses=problems(*WITH_BODY))
    async def create_webhook(
        self, data: WebhookCreate, db_session: AsyncSession, runtime: Runtime
    ) -> WebhookOut:
        created = await subscriptions.create(
            db_session,
            data.url,
            data.event_types,
            allow_private=runtime.settings.relay.webhook_allow_private,
        )
        return WebhookOut.of(created, secret=True)

    @get("/", summary="List this tenant's webhooks", responses=problems(*COMMON))
    async def list_webhooks(self, db_session: AsyncSession) -> WebhookList:
        return WebhookList(items=[WebhookOut.of(s) for s in await subscriptions.listed(db_session)])

    @get("/{webhook_id:uuid}", summary="One webhook", responses=problems(*COMMON, 404))
    async def get_webhook(self, webhook_id: uuid.UUID, db_session: AsyncSession) -> WebhookOut:
        return WebhookOut.of(await _subscription(db_session, webhook_id))

    @delete(
        "/{webhook_id:uuid}",
        summary="Delete a webhook and its queued deliveries",
        responses=problems(*COMMON, 404),
    )
    async def delete_webhook(self, webhook_id: uuid.UUID, db_session: AsyncSession) -> None:
        if not await subscriptions.remove(db_session, webhook_id):
            raise NotFoundError(f"no webhook {webhook_id} in this tenant")

    @get(
        "/{webhook_id:uuid}/deliveries",
        summary="The delivery log: recent events, newest first, each with its attempts",
        responses=problems(*COMMON, 404),
    )
    async def list_deliveries(
        self,
        webhook_id: uuid.UUID,
        db_session: AsyncSession,
        limit: Annotated[int, Parameter(ge=1, le=200)] = 50,
    ) -> DeliveryList:
        await _subscription(db_session, webhook_id)
        rows = await subscriptions.deliveries(db_session, webhook_id, limit)
        return DeliveryList(items=[_delivery_out(d, log) for d, log in rows])

    @post(
        "/{webhook_id:uuid}/deliveries/{delivery_id:int}/redeliver",
        status_code=202,
        summary="Queue a delivery again (a dead one, or one the receiver lost)",
        responses=problems(*COMMON, 404),
    )
    async def redeliver(
        self, webhook_id: uuid.UUID, delivery_id: int, db_session: AsyncSession
    ) -> DeliveryOut:
        # Ids are bigint: one outside it names no delivery (and would not bind as a parameter).
        in_range = 0 < delivery_id < 2**63
        delivery = (
            await subscriptions.redeliver(db_session, webhook_id, delivery_id) if in_range else None
        )
        if delivery is None:
            raise NotFoundError(f"no delivery {delivery_id} of webhook {webhook_id}")
        return _delivery_out(delivery, [])
