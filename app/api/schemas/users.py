"""Wire schemas of the user endpoints."""

from __future__ import annotations

import msgspec


class EraseOut(msgspec.Struct):
    user_id: str
    postgres: dict[str, int]
    opensearch_deleted: int | None
    opensearch_pending: bool
