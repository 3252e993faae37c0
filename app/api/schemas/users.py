"""Wire schemas of the user endpoints."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import msgspec


class EraseOut(msgspec.Struct):
    user_id: str
    postgres: Annotated[
        dict[str, int], msgspec.Meta(description="Rows removed from Postgres, per table.")
    ]
    opensearch_deleted: Annotated[
        int | None,
        msgspec.Meta(
            description="Documents deleted from OpenSearch (a scoped erase: memory versions "
            "whose document is gone); null while opensearch_pending."
        ),
    ]
    opensearch_pending: bool
    erased_at: datetime
    # Kept for clients written when an erase refused the user's writes for a minute.
    writes_refused_until: Annotated[
        datetime | None,
        msgspec.Meta(
            description="Deprecated, always null: no write sent after this response is "
            "refused (only writes that began before `erased_at`, which get 409)."
        ),
    ]
    guarantee: str
    agent_id: Annotated[
        str | None, msgspec.Meta(description="The agent erased; null: not scoped by agent.")
    ] = None
    run_id: Annotated[
        str | None, msgspec.Meta(description="The run erased; null: not scoped by run.")
    ] = None


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
