"""Wire schemas of the memory endpoints."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any
from uuid import UUID

import msgspec

from app.db.models import BatchJob, Memory
from app.memories.fields import (
    AgentId,
    Category,
    Content,
    ExpiresAt,
    Instant,
    Language,
    Metadata,
    RunId,
    Scope,
    SessionId,
    Speaker,
    TtlSeconds,
)
from app.vocabulary import MAX_BATCH_ITEMS


class MemoryCreate(msgspec.Struct, forbid_unknown_fields=True):
    content: Content
    category: Category | None = None
    scope: Scope = "USER"
    session_id: SessionId | None = None
    agent_id: AgentId | None = None
    run_id: RunId | None = None
    speaker: Speaker | None = None
    event_time: Instant | None = None
    metadata: Metadata = msgspec.field(default_factory=dict)
    # The conversation around the memory (e.g. the previous turns); derived from the session's
    # earlier memories when omitted. Stored beside the content, never inside it.
    context: Content | None = None
    # When the memory expires, or its time to live in seconds (one of the two, or neither).
    expires_at: ExpiresAt | None = None
    ttl_s: TtlSeconds | None = None
    language: Language | None = None


class MemoryBatchCreate(msgspec.Struct, forbid_unknown_fields=True):
    memories: Annotated[list[MemoryCreate], msgspec.Meta(min_length=1, max_length=MAX_BATCH_ITEMS)]


MemoryId = Annotated[
    UUID,
    msgspec.Meta(
        description="The memory's id, the same for its whole life: every update and the "
        "delete keep it (it is its first version's id). GET, PATCH, DELETE and history take "
        "it, as they take any of its versions' ids."
    ),
]
VersionId = Annotated[
    UUID,
    msgspec.Meta(
        description="This version's own id (`memories.id` in SQL): the ETag of a GET, what "
        "`If-Match` names on PATCH and DELETE, and a GET by it returns this very version."
    ),
]
ChainId = Annotated[
    UUID,
    msgspec.Meta(
        description="Deprecated: the same value as `id` (the memory's id, `memories.chain_id` "
        "in SQL), kept for clients written before memory ids were stable.",
        extra_json_schema={"extra": {"deprecated": True}},  # Litestar: into the OpenAPI schema
    ),
]


class MemoryOut(msgspec.Struct):
    id: MemoryId
    version_id: VersionId
    user_id: str
    chain_id: ChainId
    version: int
    content: str
    category: str
    scope: str
    session_id: str | None
    is_current: bool
    replaces_id: Annotated[
        UUID | None,
        msgspec.Meta(
            description="The version this one replaced: a version id (its `version_id`), null "
            "for version 1."
        ),
    ]
    speaker: str | None
    event_time: datetime | None
    created_at: datetime
    superseded_at: datetime | None
    # When the fact ended in the world (PATCH or DELETE with event_end); null: not ended.
    event_end: datetime | None
    metadata: dict[str, Any]
    source_message_id: UUID | None
    external_id: str | None = None
    context: str | None = None
    # When the memory expires (null: never); the same on all its versions.
    expires_at: datetime | None = None
    agent_id: str | None = None
    run_id: str | None = None
    # ISO 639-1, given by the client or detected; null: the content has no letters.
    language: str | None = None

    @classmethod
    def of(cls, m: Memory) -> MemoryOut:
        return cls(
            id=m.chain_id,
            version_id=m.id,
            user_id=m.user_id,
            chain_id=m.chain_id,
            version=m.version,
            content=m.content,
            category=m.category,
            scope=m.scope,
            session_id=m.session_id,
            is_current=m.is_current,
            replaces_id=m.replaces_id,
            speaker=m.speaker,
            event_time=m.event_time,
            created_at=m.created_at,
            superseded_at=m.superseded_at,
            event_end=m.event_end,
            metadata=m.metadata_,
            source_message_id=m.source_message_id,
            external_id=m.external_id,
            context=m.context,
            expires_at=m.expires_at,
            agent_id=m.agent_id,
            run_id=m.run_id,
            language=m.language,
        )


class MemoryList(msgspec.Struct):
    items: list[MemoryOut]
    next_cursor: str | None


class MemoryBatchOut(msgspec.Struct):
    items: list[MemoryOut]


class MemoriesDeletedOut(msgspec.Struct):
    """A delete of many memories: each one's current version ended, its history kept."""

    user_id: str
    deleted: Annotated[int, msgspec.Meta(description="Memories whose current version ended.")]
    ids: Annotated[
        list[UUID],
        msgspec.Meta(
            description="Their ids (each memory's lasting `id`): GET .../memories/{id} reads "
            "its last version, `/history` every version."
        ),
    ]

    @classmethod
    def of(cls, user_id: str, ended: list[Memory]) -> MemoriesDeletedOut:
        return cls(user_id=user_id, deleted=len(ended), ids=[m.chain_id for m in ended])


class BatchJobOut(msgspec.Struct):
    """A batch create answered 202: its job, and once it is done the memories it wrote."""

    job_id: UUID
    user_id: str
    status: Annotated[
        str,
        msgspec.Meta(
            description="queued | running | done | failed: `done`, the memories are written "
            "(`items`, as the 201 would have listed them); `failed`, none is (`error` says why)."
        ),
    ]
    memories: Annotated[int, msgspec.Meta(description="How many memories the batch holds.")]
    attempts: Annotated[int, msgspec.Meta(description="How many times a worker took it.")]
    error: Annotated[
        str | None, msgspec.Meta(description="Why the last attempt failed, if one did.")
    ]
    created_at: datetime
    finished_at: datetime | None
    items: Annotated[
        list[MemoryOut] | None,
        msgspec.Meta(description="When done: the memories written, in batch order."),
    ] = None

    @classmethod
    def of(cls, job: BatchJob, written: list[Memory] | None = None) -> BatchJobOut:
        return cls(
            job_id=job.id,
            user_id=job.user_id,
            status=job.status,
            memories=job.memories,
            attempts=job.attempts,
            error=job.error,
            created_at=job.created_at,
            finished_at=job.finished_at,
            items=[MemoryOut.of(m) for m in written] if written is not None else None,
        )


class HistoryOut(msgspec.Struct):
    id: MemoryId
    chain_id: ChainId
    versions: Annotated[list[MemoryOut], msgspec.Meta(description="Oldest first.")]
