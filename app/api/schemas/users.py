"""Wire schemas of the user endpoints."""

from __future__ import annotations

from datetime import datetime

import msgspec


class EraseOut(msgspec.Struct):
    user_id: str
    postgres: dict[str, int]
    opensearch_deleted: int | None
    opensearch_pending: bool
    erased_at: datetime
    # Until then every write of this user is refused (409): nothing in flight survives.
    writes_refused_until: datetime
    guarantee: str
