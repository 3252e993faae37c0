"""Wire schemas (msgspec). Constraints here give 400s before any service code runs."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal
from uuid import UUID

import msgspec

from app.db.models import Memory
from app.imports.service import ImportSummary

Content = Annotated[str, msgspec.Meta(min_length=1, max_length=100_000)]
SessionId = Annotated[str, msgspec.Meta(min_length=1, max_length=256)]
Speaker = Annotated[str, msgspec.Meta(min_length=1, max_length=256)]
Scope = Literal["USER", "CONTEXT"]


class MemoryCreate(msgspec.Struct, forbid_unknown_fields=True):
    content: Content
    category: str | None = None
    scope: Scope = "USER"
    session_id: SessionId | None = None
    speaker: Speaker | None = None
    event_time: datetime | None = None
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)


class MemoryBatchCreate(msgspec.Struct, forbid_unknown_fields=True):
    memories: Annotated[list[MemoryCreate], msgspec.Meta(min_length=1)]


class MemoryUpdate(msgspec.Struct, forbid_unknown_fields=True):
    """Fields to change; omitted fields keep their value in the new version."""

    content: Content | msgspec.UnsetType = msgspec.UNSET
    category: str | msgspec.UnsetType = msgspec.UNSET
    scope: Scope | msgspec.UnsetType = msgspec.UNSET
    session_id: SessionId | msgspec.UnsetType | None = msgspec.UNSET
    speaker: Speaker | msgspec.UnsetType | None = msgspec.UNSET
    event_time: datetime | msgspec.UnsetType | None = msgspec.UNSET
    metadata: dict[str, Any] | msgspec.UnsetType = msgspec.UNSET


class MemoryOut(msgspec.Struct):
    id: UUID
    user_id: str
    chain_id: UUID
    version: int
    content: str
    category: str
    scope: str
    session_id: str | None
    is_current: bool
    replaces_id: UUID | None
    speaker: str | None
    event_time: datetime | None
    created_at: datetime
    superseded_at: datetime | None
    metadata: dict[str, Any]
    source_message_id: UUID | None
    external_id: str | None = None

    @classmethod
    def of(cls, m: Memory) -> MemoryOut:
        return cls(
            id=m.id,
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
            metadata=m.metadata_,
            source_message_id=m.source_message_id,
            external_id=m.external_id,
        )


class MemoryList(msgspec.Struct):
    items: list[MemoryOut]
    next_cursor: str | None


class MemoryBatchOut(msgspec.Struct):
    items: list[MemoryOut]


class HistoryOut(msgspec.Struct):
    chain_id: UUID
    versions: list[MemoryOut]


class StageSwitchesIn(msgspec.Struct, forbid_unknown_fields=True):
    """Turn stages off for one request (ablations, latency-sensitive callers)."""

    vector: bool = True
    rescore_768d: bool = True
    bm25: bool = True
    temporal: bool = True
    dedup: bool = True
    rerank: bool = True
    history: bool = True


class RrfIn(msgspec.Struct, forbid_unknown_fields=True):
    """Override the fusion constants for one request."""

    k: Annotated[int, msgspec.Meta(ge=0, le=1000)] | None = None
    weight_vector: Annotated[float, msgspec.Meta(ge=0, le=1)] | None = None
    weight_bm25: Annotated[float, msgspec.Meta(ge=0, le=1)] | None = None


Consistency = Literal["eventual", "indexed"]
WaitTimeoutMs = Annotated[int, msgspec.Meta(ge=0, le=600_000)]


class SearchBody(msgspec.Struct, forbid_unknown_fields=True):
    query: Annotated[str, msgspec.Meta(min_length=1, max_length=8_000)]
    top_k: int | None = None
    session_id: SessionId | None = None
    as_of: datetime | None = None
    explain: bool = False
    stages: StageSwitchesIn = msgspec.field(default_factory=StageSwitchesIn)
    rrf: RrfIn = msgspec.field(default_factory=RrfIn)
    consistency: Annotated[
        Consistency,
        msgspec.Meta(
            description='"eventual" (default) searches at once; "indexed" first waits, '
            "bounded by wait_timeout_ms, until this user's changes committed before the "
            "request are in the BM25 index (read-your-writes)."
        ),
    ] = "eventual"
    wait_timeout_ms: Annotated[
        WaitTimeoutMs | None,
        msgspec.Meta(
            description='Bound of the "indexed" wait; default and maximum: '
            "COGNIS_INDEX_WAIT_MAX_MS."
        ),
    ] = None


class StageScoreOut(msgspec.Struct):
    rank: int | None
    score: float | None


class SearchHitOut(msgspec.Struct):
    memory: MemoryOut
    rank: int
    score: float
    superseded: bool
    history_of: UUID | None = None
    explanation: dict[str, StageScoreOut] | None = None


class IndexLagOut(msgspec.Struct):
    """How far the BM25 index was behind Postgres for this user when the search ran."""

    pending: Annotated[
        int,
        msgspec.Meta(description="This user's changes committed but not yet in the BM25 index."),
    ]
    oldest_pending_age_ms: Annotated[
        float | None, msgspec.Meta(description="Age of the oldest of them; null when none.")
    ]
    consistency: Consistency
    stale: Annotated[
        bool,
        msgspec.Meta(
            description="True when the BM25 leg may have missed or shown an older state of "
            'this user\'s memories: changes were pending ("eventual"), or the "indexed" wait '
            "ran out before they were delivered. False when the BM25 stage was switched off."
        ),
    ]
    waited_ms: Annotated[
        float | None, msgspec.Meta(description='Time spent in the "indexed" wait; else null.')
    ] = None


class SearchOut(msgspec.Struct):
    results: list[SearchHitOut]
    missing_legs: list[str]
    stages: dict[str, str]
    stage_durations_ms: dict[str, float]
    duration_ms: float
    index_lag: IndexLagOut
    query_analysis: dict[str, Any] | None = None


class EraseOut(msgspec.Struct):
    user_id: str
    postgres: dict[str, int]
    opensearch_deleted: int | None
    opensearch_pending: bool


class ImportErrorOut(msgspec.Struct):
    line: int
    field: str | None
    detail: str


class ImportSummaryOut(msgspec.Struct):
    imported: int
    skipped: int
    failed: int
    errors: list[ImportErrorOut]

    @classmethod
    def of(cls, summary: ImportSummary) -> ImportSummaryOut:
        return cls(
            imported=summary.imported,
            skipped=summary.skipped,
            failed=summary.failed,
            errors=[ImportErrorOut(e.line, e.field, e.detail) for e in summary.errors],
        )
