"""The transactional outbox: changes for OpenSearch, written with the memory change."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    DateTime,
    Identity,
    Index,
    Integer,
    Text,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB, UUID
from sqlalchemy.orm import Mapped, mapped_column

from app.db.models.base import Base, in_list, tenant_column

# index: put a memory version's document; erase_user: delete every document of a user;
# delete_document: delete one version's document (an expired memory, reaped; 0017).
OUTBOX_OPS = ("index", "erase_user", "delete_document")


class OutboxEvent(Base):
    """A pending change for OpenSearch, written in the same transaction as the memory change."""

    __tablename__ = "outbox"

    tenant_id: Mapped[uuid.UUID] = tenant_column()

    # Monotonic id: doubles as OpenSearch's external version, so a stale event never wins.
    id: Mapped[int] = mapped_column(BigInteger, Identity(always=True), primary_key=True)
    user_id: Mapped[str] = mapped_column(Text, nullable=False)
    op: Mapped[str] = mapped_column(Text, nullable=False)
    memory_id: Mapped[uuid.UUID | None] = mapped_column(UUID(as_uuid=True))
    payload: Mapped[dict[str, Any]] = mapped_column(
        JSONB, nullable=False, server_default=text("'{}'::jsonb")
    )
    created_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), nullable=False, server_default=func.now()
    )
    processed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    attempts: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    last_error: Mapped[str | None] = mapped_column(Text)
    next_attempt_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), nullable=False, server_default=func.now()
    )

    __table_args__ = (
        CheckConstraint(in_list("op", OUTBOX_OPS), name="op"),
        CheckConstraint("op <> 'index' OR memory_id IS NOT NULL", name="index_has_memory"),
        Index("outbox_pending_idx", "id", postgresql_where=text("processed_at IS NULL")),
        # One user's pending rows: the index lag every search reports, the read-your-writes
        # wait, and the relay's "no earlier pending erase of this user" check.
        Index(
            "outbox_user_pending_idx",
            "user_id",
            "id",
            postgresql_where=text("processed_at IS NULL"),
        ),
        Index("outbox_user_id_idx", "user_id"),
        # One user's delivered rows by delivery time: those still within the index's refresh
        # window count in the index lag (delivered, maybe not yet searchable).
        Index(
            "outbox_user_delivered_idx",
            "user_id",
            "processed_at",
            postgresql_where=text("processed_at IS NOT NULL"),
        ),
        # Delivered rows by delivery time, oldest first: the retention job's (0026).
        Index(
            "outbox_delivered_idx",
            "processed_at",
            postgresql_where=text("processed_at IS NOT NULL"),
        ),
    )
