"""What an erase or an expiry leaves behind: tombstones of erased users and scopes, and the
records of reaped expired memories."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    DateTime,
    Identity,
    Index,
    Integer,
    Text,
    func,
)
from sqlalchemy.dialects.postgresql import UUID
from sqlalchemy.orm import Mapped, mapped_column

from app.db.models.base import Base, tenant_column


class UserErasure(Base):
    """The tombstone an erase leaves: a write of the user that began before `erased_at` is
    refused, so a write in flight when the erase ran cannot bring the user back; one that
    began after it is accepted. Holds only the id and two times; `writes_refused_until` is
    when the tombstone goes (COGNIS_ERASE_TOMBSTONE_S after the erase, longer than any write
    takes to reach its transaction), deleted then by the retention job."""

    __tablename__ = "user_erasures"

    tenant_id: Mapped[uuid.UUID] = tenant_column(primary_key=True)
    user_id: Mapped[str] = mapped_column(Text, primary_key=True)
    erased_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    writes_refused_until: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)


class MemoryExpiry(Base):
    """The audit row the expiry reaper leaves per memory it removed (0017): like an erase's,
    it says that something was removed and when, never what it said (no content, metadata or
    vectors). Deleted with the user by an erase."""

    __tablename__ = "memory_expiries"

    tenant_id: Mapped[uuid.UUID] = tenant_column(primary_key=True)
    chain_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True)
    user_id: Mapped[str] = mapped_column(Text, nullable=False)
    # How many versions of the chain were removed (from Postgres; their documents follow
    # through the outbox).
    versions: Mapped[int] = mapped_column(Integer, nullable=False)
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    reaped_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), nullable=False, server_default=func.now()
    )

    __table_args__ = (Index(None, "user_id", "reaped_at"),)


class ScopeErasure(Base):
    """The audit row a scoped erase leaves (0019): one agent's and/or one run's memories and
    messages of a user removed from both stores. Like a user erase's, it says what was removed
    and when, never what it said. Deleted with the user by an erase of the whole user."""

    __tablename__ = "scope_erasures"

    tenant_id: Mapped[uuid.UUID] = tenant_column()

    id: Mapped[int] = mapped_column(BigInteger, Identity(always=True), primary_key=True)
    user_id: Mapped[str] = mapped_column(Text, nullable=False)
    agent_id: Mapped[str | None] = mapped_column(Text)
    run_id: Mapped[str | None] = mapped_column(Text)
    memories: Mapped[int] = mapped_column(Integer, nullable=False)  # chains
    versions: Mapped[int] = mapped_column(Integer, nullable=False)
    messages: Mapped[int] = mapped_column(Integer, nullable=False)
    erased_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), nullable=False, server_default=func.now()
    )

    __table_args__ = (
        CheckConstraint("agent_id IS NOT NULL OR run_id IS NOT NULL", name="names_a_scope"),
        Index(None, "user_id", "erased_at"),
    )


class UserLock(Base):
    """The row whose lock serialises a user's writes (0041): FOR KEY SHARE by a write, FOR
    UPDATE by an erase, FOR NO KEY UPDATE by the ingestion worker (app/memories/user_lock.py).
    Row locks need UPDATE on the table, which only the service's roles have, so no reader can
    take one, where any role may take any advisory lock."""

    __tablename__ = "user_locks"

    tenant_id: Mapped[uuid.UUID] = tenant_column(primary_key=True)
    user_id: Mapped[str] = mapped_column(Text, primary_key=True)
