"""Named things of a user's memories and the memories that mention them."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import (
    CheckConstraint,
    DateTime,
    ForeignKey,
    Index,
    Text,
    UniqueConstraint,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, UUID
from sqlalchemy.orm import Mapped, mapped_column

from app.db.models.base import Base, in_list, tenant_column
from app.vocabulary import (
    ENTITY_TYPES,
)


class Entity(Base):
    """A named thing of a user's memories (0039, docs/entities.md): a person, place,
    organisation, product, title, event, group or language, with the other forms of its name
    that are the same thing. Deleted with the user by an erase."""

    __tablename__ = "entities"

    tenant_id: Mapped[uuid.UUID] = tenant_column()

    id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), primary_key=True, server_default=text("gen_random_uuid()")
    )
    user_id: Mapped[str] = mapped_column(Text, nullable=False)
    # The longest form seen; `key` is its lower case, unique per user and type.
    name: Mapped[str] = mapped_column(Text, nullable=False)
    type: Mapped[str] = mapped_column(Text, nullable=False)
    key: Mapped[str] = mapped_column(Text, nullable=False)
    aliases: Mapped[list[str]] = mapped_column(
        ARRAY(Text), nullable=False, server_default=text("'{}'")
    )
    first_seen: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), nullable=False, server_default=func.now()
    )
    last_seen: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), nullable=False, server_default=func.now()
    )

    __table_args__ = (
        CheckConstraint(in_list("type", ENTITY_TYPES), name="type"),
        UniqueConstraint("tenant_id", "user_id", "type", "key"),
        Index(None, "user_id"),
    )


class MemoryEntity(Base):
    """A memory version names an entity (0039): deleted with the version or the entity."""

    __tablename__ = "memory_entities"

    tenant_id: Mapped[uuid.UUID] = tenant_column()

    memory_id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), ForeignKey("memories.id", ondelete="CASCADE"), primary_key=True
    )
    entity_id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True),
        ForeignKey("entities.id", ondelete="CASCADE"),
        primary_key=True,
        index=True,
    )
    user_id: Mapped[str] = mapped_column(Text, nullable=False, index=True)
    mention: Mapped[str] = mapped_column(Text, nullable=False)
