"""Expiry: a memory given `expires_at` (or `ttl_s`) disappears from every read the moment the
transaction's now() reaches it, and the reaper (app/memories/expiry_reaper.py) then removes it,
every version, from both stores (docs/architecture.md, "Expiry").

`unexpired` is the one definition of "not expired" in SQL: every read of memories applies
it (search's vector leg and load, list, get, history, neighbours, export). The BM25 leg's
documents carry `expires_at` too (app/search_index/client.py `visible_documents`), so an
expired memory takes no place in its top k; Postgres re-checks what the index returns.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import structlog
from sqlalchemy import ColumnElement, func, or_

from app.db.models import Memory
from app.errors import InvalidInputError
from app.memories.fields import check_instant

log = structlog.get_logger(__name__)


def unexpired(columns: Any = None) -> ColumnElement[bool]:
    """SQL: the row has not expired at the transaction's now(). `columns`: a table's or an
    alias's `.c` (default: memories)."""
    expires_at = (columns if columns is not None else Memory.__table__.c).expires_at
    return or_(expires_at.is_(None), expires_at > func.now())


def resolve_expiry(
    expires_at: datetime | None, ttl_s: float | None, field_prefix: str = ""
) -> datetime | None:
    """The expiry a write asks for: `expires_at` as given, or `ttl_s` seconds from now (the
    write's time, converted once: what is stored is the instant). Refused with a 400 naming
    the field when both are given, or when the instant is not in the future: a memory that
    has expired when written would never be seen."""
    if expires_at is not None and ttl_s is not None:
        raise InvalidInputError(
            "give expires_at or ttl_s, not both: ttl_s is turned into expires_at when written",
            field=f"{field_prefix}ttl_s",
        )
    now = datetime.now(UTC)
    field = f"{field_prefix}expires_at"
    if ttl_s is not None:
        if ttl_s <= 0:
            raise InvalidInputError(
                f"ttl_s must be a positive number of seconds, not {ttl_s}",
                field=f"{field_prefix}ttl_s",
            )
        try:
            expires_at = now + timedelta(seconds=ttl_s)
        except OverflowError:
            expires_at = datetime.max.replace(tzinfo=UTC)
        field = f"{field_prefix}ttl_s"
    expires_at = check_instant(expires_at, field)
    if expires_at is not None and expires_at <= now:
        raise InvalidInputError(
            f"expires_at {expires_at.isoformat()} is not in the future (now is "
            f"{now.isoformat()}): an expired memory would never be seen; give a later time, "
            "or omit it for a memory that does not expire",
            field=field,
        )
    return expires_at
