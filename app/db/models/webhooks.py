"""Webhook subscriptions, their deliveries and each delivery's attempts."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    DateTime,
    ForeignKey,
    Identity,
    Index,
    Integer,
    Text,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, UUID
from sqlalchemy.orm import Mapped, mapped_column

from app.db.models.base import Base, in_list, tenant_column


class WebhookSubscription(Base):
    """A tenant's webhook receiver (0033; app/webhooks/): events of the wanted types are
    POSTed to `url`, signed with `secret`."""

    __tablename__ = "webhook_subscriptions"

    tenant_id: Mapped[uuid.UUID] = tenant_column()
    id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), primary_key=True, server_default=text("gen_random_uuid()")
    )
    url: Mapped[str] = mapped_column(Text, nullable=False)
    secret: Mapped[str] = mapped_column(Text, nullable=False)
    event_types: Mapped[list[str]] = mapped_column(ARRAY(Text), nullable=False)
    active: Mapped[bool] = mapped_column(Boolean, nullable=False, server_default=text("true"))
    created_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), nullable=False, server_default=func.now()
    )

    __table_args__ = (Index(None, "tenant_id"),)


class WebhookDelivery(Base):
    """One event for one subscription, queued in the transaction of the change it reports."""

    __tablename__ = "webhook_deliveries"

    tenant_id: Mapped[uuid.UUID] = tenant_column()
    id: Mapped[int] = mapped_column(BigInteger, Identity(always=True), primary_key=True)
    subscription_id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True),
        ForeignKey("webhook_subscriptions.id", ondelete="CASCADE"),
        nullable=False,
    )
    event_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), nullable=False)
    user_id: Mapped[str] = mapped_column(Text, nullable=False)
    type: Mapped[str] = mapped_column(Text, nullable=False)
    payload: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False)
    status: Mapped[str] = mapped_column(Text, nullable=False, server_default="pending")
    attempts: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    next_attempt_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), nullable=False, server_default=func.now()
    )
    created_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), nullable=False, server_default=func.now()
    )
    delivered_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))

    __table_args__ = (
        CheckConstraint(in_list("status", ("pending", "delivered", "dead")), name="status"),
        Index(
            "webhook_deliveries_pending_idx",
            "subscription_id",
            "user_id",
            "id",
            postgresql_where=text("status = 'pending'"),
        ),
        Index(None, "subscription_id", "id"),
        Index(None, "user_id"),
        # Delivered rows by delivery time, oldest first: the retention job's (0036).
        Index(
            "webhook_deliveries_delivered_idx",
            "delivered_at",
            postgresql_where=text("status = 'delivered'"),
        ),
    )


class WebhookAttempt(Base):
    """One POST of a delivery: the delivery log."""

    __tablename__ = "webhook_attempts"

    tenant_id: Mapped[uuid.UUID] = tenant_column()
    id: Mapped[int] = mapped_column(BigInteger, Identity(always=True), primary_key=True)
    delivery_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("webhook_deliveries.id", ondelete="CASCADE"), nullable=False
    )
    attempted_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), nullable=False, server_default=func.now()
    )
    status_code: Mapped[int | None] = mapped_column(Integer)
    error: Mapped[str | None] = mapped_column(Text)
    duration_ms: Mapped[int] = mapped_column(Integer, nullable=False)

    __table_args__ = (Index(None, "delivery_id"),)
