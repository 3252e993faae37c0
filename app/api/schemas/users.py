"""Wire schemas of the user endpoints."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

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


class UserSummaryOut(msgspec.Struct):
    user_id: str
    memories: Annotated[int, msgspec.Meta(description="Current memories.")]
    versions: Annotated[int, msgspec.Meta(description="Every version, superseded ones too.")]
    last_change: Annotated[
        datetime, msgspec.Meta(description="The latest creation or supersession of a version.")
    ]


class UserList(msgspec.Struct):
    items: list[UserSummaryOut]
    next_cursor: Annotated[
        str | None, msgspec.Meta(description="Pass as `cursor` for the next page; null: last.")
    ]
