"""The console's login sessions."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    DateTime,
    Index,
    LargeBinary,
    func,
)
from sqlalchemy.orm import Mapped, mapped_column

from app.db.models.base import Base


class ConsoleSession(Base):
    """A console login (0027; app/console/sessions.py): the browser's cookie holds a random
    secret, this row its SHA-256 and the API key sealed under a key derived from it. Not a
    tenant's row: the key says which tenant, at every request."""

    __tablename__ = "console_sessions"

    id: Mapped[bytes] = mapped_column(LargeBinary, primary_key=True)
    sealed_key: Mapped[bytes] = mapped_column(LargeBinary, nullable=False)
    created_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), nullable=False, server_default=func.now()
    )
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)

    __table_args__ = (Index(None, "expires_at"),)
