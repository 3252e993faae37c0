"""Wire schemas of the entities: the named things of a user's memories (docs/entities.md)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal
from uuid import UUID

import msgspec

from app.api.schemas.memories import MemoryOut

EntityType = Literal[
    "person", "place", "organisation", "product", "title", "event", "group", "language"
]


class EntityOut(msgspec.Struct):
    id: Annotated[UUID, msgspec.Meta(description="The entity's id (for its memories).")]
    name: Annotated[str, msgspec.Meta(description="The longest form of its name seen.")]
    type: EntityType
    aliases: Annotated[
        list[str],
        msgspec.Meta(description='Other forms of the name that are the same thing ("Mel").'),
    ]
    first_seen: Annotated[
        datetime, msgspec.Meta(description="When the first memory naming it was written.")
    ]
    last_seen: Annotated[
        datetime, msgspec.Meta(description="When the latest memory naming it was written.")
    ]
    memories: Annotated[
        int,
        msgspec.Meta(description="Current memories that name it, visible to this request."),
    ]


class EntityList(msgspec.Struct):
    items: list[EntityOut]
    next_cursor: Annotated[
        str | None,
        msgspec.Meta(description="Pass as `cursor` for the next page; null: the last page."),
    ]


class EntityMemoriesOut(msgspec.Struct):
    entity: EntityOut
    memories: Annotated[
        list[MemoryOut],
        msgspec.Meta(description="Current memories that name the entity, newest first."),
    ]
