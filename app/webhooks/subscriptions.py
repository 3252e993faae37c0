"""A tenant's subscriptions and delivery log, in the caller's session (row-level security
keeps every query to the request's tenant)."""

from __future__ import annotations

import uuid

from sqlalchemy import delete, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import WebhookAttempt, WebhookDelivery, WebhookSubscription
from app.errors import InvalidInputError
from app.webhooks.delivery import WEBHOOK_CHANNEL
from app.webhooks.events import EVENT_TYPES
from app.webhooks.signing import new_secret
from app.webhooks.urls import WebhookUrlRefused, check_url


async def create(
    session: AsyncSession, url: str, event_types: list[str], *, allow_private: bool
) -> WebhookSubscription:
    """A new subscription with a new secret (the API and `python -m app webhooks create`):
    InvalidInputError when a type is unknown or the URL is refused (app/webhooks/urls.py)."""
    unknown = sorted(set(event_types) - set(EVENT_TYPES))
    if unknown:
        raise InvalidInputError(
            f"event_types {unknown} cannot be subscribed to; choose among {list(EVENT_TYPES)}"
        )
    try:
        await check_url(url, allow_private=allow_private)
    except WebhookUrlRefused as exc:
        raise InvalidInputError(str(exc)) from exc
    subscription = WebhookSubscription(
        url=url,
        secret=new_secret(),
        event_types=sorted(set(event_types), key=EVENT_TYPES.index),
    )
    session.add(subscription)
    await session.flush()
    await session.refresh(subscription)
    return subscription


async def listed(session: AsyncSession) -> list[WebhookSubscription]:
    query = select(WebhookSubscription).order_by(WebhookSubscription.created_at)
    return list(await session.scalars(query))


async def one(session: AsyncSession, subscription_id: uuid.UUID) -> WebhookSubscription | None:
    return await session.get(WebhookSubscription, subscription_id)


async def remove(session: AsyncSession, subscription_id: uuid.UUID) -> bool:
    result = await session.execute(
        delete(WebhookSubscription).where(WebhookSubscription.id == subscription_id)
    )
    return bool(result.rowcount)  # type: ignore[attr-defined]


async def deliveries(
    session: AsyncSession, subscription_id: uuid.UUID, limit: int
) -> list[tuple[WebhookDelivery, list[WebhookAttempt]]]:
    rows = list(
        await session.scalars(
            select(WebhookDelivery)
            .where(WebhookDelivery.subscription_id == subscription_id)
            .order_by(WebhookDelivery.id.desc())
            .limit(limit)
        )
    )
    attempts: dict[int, list[WebhookAttempt]] = {d.id: [] for d in rows}
    if rows:
        for attempt in await session.scalars(
            select(WebhookAttempt)
            .where(WebhookAttempt.delivery_id.in_(list(attempts)))
            .order_by(WebhookAttempt.id)
        ):
            attempts[attempt.delivery_id].append(attempt)
    return [(d, attempts[d.id]) for d in rows]


async def redeliver(
    session: AsyncSession, subscription_id: uuid.UUID, delivery_id: int
) -> WebhookDelivery | None:
    """Queue a delivery again (delivered or dead): due now, its attempts counted afresh, the
    dispatcher woken at commit."""
    result = await session.execute(
        update(WebhookDelivery)
        .where(
            WebhookDelivery.id == delivery_id,
            WebhookDelivery.subscription_id == subscription_id,
        )
        .values(status="pending", attempts=0, next_attempt_at=func.now(), delivered_at=None)
        .returning(WebhookDelivery)
    )
    delivery = result.scalars().first()
    if delivery is not None:
        await session.execute(select(func.pg_notify(WEBHOOK_CHANNEL, "")))
    return delivery
