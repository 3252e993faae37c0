"""The declarative base every table shares: its naming convention (constraint and index
names as the migrations spell them) and the tenant column of tenant-owned rows."""

from __future__ import annotations

import uuid

from sqlalchemy import (
    MetaData,
    text,
)
from sqlalchemy.dialects.postgresql import UUID
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

NAMING_CONVENTION = {
    "ix": "%(table_name)s_%(column_0_N_name)s_idx",
    "uq": "%(table_name)s_%(column_0_N_name)s_key",
    "ck": "%(table_name)s_%(constraint_name)s_check",
    "fk": "%(table_name)s_%(column_0_name)s_fkey",
    "pk": "%(table_name)s_pkey",
}


def in_list(column: str, values: tuple[str, ...]) -> str:
    quoted = ", ".join(f"'{v}'" for v in values)
    return f"{column} IN ({quoted})"


def tenant_column(*, primary_key: bool = False) -> Mapped[uuid.UUID]:
    """A row's tenant: the transaction's (`cognis_tenant()`, set by app.db.tenant)."""
    return mapped_column(
        UUID(as_uuid=True),
        nullable=False,
        primary_key=primary_key,
        server_default=text("cognis_tenant()"),
    )


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
