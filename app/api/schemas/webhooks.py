"""Webhook subscriptions and their delivery log on the wire (app/api/webhooks.py)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any

import msgspec

from app.db.models import WebhookSubscription
from app.webhooks.events import EVENT_TYPES


class WebhookCreate(msgspec.Struct, forbid_unknown_fields=True):
    url: Annotated[
        str,
        msgspec.Meta(
            min_length=1, max_length=2048, description="Where events are POSTed (http or https)."
        ),
    ]
    event_types: Annotated[
        list[str],
        msgspec.Meta(
            min_length=1,
            max_length=16,
            description=f"Event types to deliver, of: {', '.join(EVENT_TYPES)} (default: all).",
        ),
    ] = msgspec.field(default_factory=lambda: list(EVENT_TYPES))


class WebhookOut(msgspec.Struct):
    id: uuid.UUID
    url: str
    event_types: list[str]
    active: bool
    created_at: datetime
    secret: Annotated[
        str | None,
        msgspec.Meta(description="The signing secret: shown once, in the creation's answer."),
    ] = None

    @classmethod
    def of(cls, subscription: WebhookSubscription, *, secret: bool = False) -> WebhookOut:
        return cls(
            id=subscription.id,
            url=subscription.url,
            event_types=list(subscription.event_types),
            active=subscription.active,
            created_at=subscription.created_at,
            secret=subscription.secret if secret else None,
        )


class WebhookList(msgspec.Struct):
    items: list[WebhookOut]


class AttemptOut(msgspec.Struct):
    attempted_at: datetime
    status_code: int | None
    error: str | None
    duration_ms: int


class DeliveryOut(msgspec.Struct):
    id: int
    event_id: uuid.UUID
    type: str
    user_id: str
    status: str
    attempts: int
    created_at: datetime
    delivered_at: datetime | None
    next_attempt_at: datetime
    payload: dict[str, Any]
    log: list[AttemptOut]


class DeliveryList(msgspec.Struct):
    items: list[DeliveryOut]
