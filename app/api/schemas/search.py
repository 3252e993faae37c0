"""Wire schemas of the search endpoint."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any
from uuid import UUID

import msgspec

from app.api.schemas.memories import MemoryOut
from app.memories.fields import AgentId, Instant, RunId, SessionId, TopK
from app.memories.filters import FILTER_JSON_SCHEMA
from app.retrieval.plan import StageSwitches
from app.retrieval.profiles import PROFILES, LeverOverrides, ProfileName
from app.retrieval.service import Consistency
from app.vocabulary import MAX_CONTENT_CHARS


class RrfIn(msgspec.Struct, forbid_unknown_fields=True):
    """Override the fusion constants for one request."""

    k: Annotated[int, msgspec.Meta(ge=0, le=1000)] | None = None
    weight_vector: Annotated[float, msgspec.Meta(ge=0, le=1)] | None = None
    weight_bm25: Annotated[float, msgspec.Meta(ge=0, le=1)] | None = None


MinRelevance = Annotated[
    float,
    msgspec.Meta(
        ge=0,
        le=1,
        description="Results whose `relevance` is below this are left out, before the top_k "
        "cut: fewer results, or none when nothing is relevant. Null: COGNIS_MIN_RELEVANCE; 0: "
        "none left out. Needs the vector stage (relevance is measured with its query vector): "
        "with `stages.vector` false it is a 400, and the setting's default does not apply.",
    ),
]
WaitTimeoutMs = Annotated[int, msgspec.Meta(ge=0, le=600_000)]


def _profile_description() -> str:
    """Each profile with the levers it switches on, read from PROFILES so the two agree."""
    described = []
    for name, levers in PROFILES.items():
        on = [lever for lever in levers.__struct_fields__ if getattr(levers, lever)]
        levers_on = f" plus the levers {', '.join(on)}" if on else " exactly"
        described.append(f'"{name}": SPEC\'s 8 stages{levers_on}')
    return "; ".join(described) + ". Null: COGNIS_RETRIEVAL_PROFILE."


class SearchBody(msgspec.Struct, forbid_unknown_fields=True):
    query: Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_CONTENT_CHARS)]
    top_k: TopK | None = None
    session_id: SessionId | None = None
    agent_id: Annotated[
        AgentId | None,
        msgspec.Meta(
            description="The agent asking: it sees its own memories and the user's shared ones "
            "(no agent_id). Omitted: every memory of the user, whatever its agent."
        ),
    ] = None
    run_id: Annotated[
        RunId | None,
        msgspec.Meta(
            description="The run asking: it sees its own memories and those of no run. "
            "Omitted: every memory of the user, whatever its run."
        ),
    ] = None
    as_of: Annotated[
        Instant | None,
        msgspec.Meta(
            description="The query's reference time: relative phrases in the query "
            '("last week", "yesterday") are resolved against it; default: now. It does '
            "not filter memories by time: for what the store knew, or what was true, at a "
            "past moment, use the analysts' SQL functions (docs/analysts.md)."
        ),
    ] = None
    filters: Annotated[
        dict[str, Any] | None,
        msgspec.Meta(
            description="Only memories matching this filter are searched: both legs apply "
            "it before ranking. " + FILTER_JSON_SCHEMA["description"],
            extra_json_schema={"examples": FILTER_JSON_SCHEMA["examples"]},
        ),
    ] = None
    min_relevance: MinRelevance | None = None
    explain: bool = False
    stages: StageSwitches = msgspec.field(default_factory=StageSwitches)
    rrf: RrfIn = msgspec.field(default_factory=RrfIn)
    profile: Annotated[
        ProfileName | None,
        msgspec.Meta(description=_profile_description()),
    ] = None
    levers: LeverOverrides = msgspec.field(default_factory=LeverOverrides)
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
    score: Annotated[
        float,
        msgspec.Meta(
            description="The fused score: it orders this search's results and means nothing "
            "beyond them (compare `relevance` across searches)."
        ),
    ]
    relevance: Annotated[
        float | None,
        msgspec.Meta(
            description="The query's cosine similarity to the memory in the 768D embedding "
            "space (its content or its contextual text, whichever is closer), clipped to 0-1: "
            "a fixed scale that depends on the query and this memory only, so one threshold "
            "(`min_relevance`) means the same for every query. Null when the request switched "
            "the vector stage off (the query is then not embedded)."
        ),
    ]
    superseded: bool
    history_of: Annotated[
        UUID | None,
        msgspec.Meta(
            description="Set on an earlier version shown beside its memory's hit: that "
            "memory's id (the hit's `memory.id`, and this version's too). Null on a hit."
        ),
    ] = None
    explanation: dict[str, StageScoreOut] | None = None
    earlier: Annotated[
        bool,
        msgspec.Meta(
            description="True when a newer current memory contradicts this one (another value "
            "of where the user lives, works, their job, partner, age, field of study or diet, "
            "or the fact's end: lever `newer_first`): this one is the earlier fact, and the "
            "newer one ranks above it. Prefer `later_memory_id`'s memory."
        ),
    ] = False
    later_memory_id: Annotated[
        UUID | None,
        msgspec.Meta(
            description="With `earlier`: the id (`memory.id`) of the newest memory that "
            "contradicts this one. Null otherwise."
        ),
    ] = None
    event_at: Annotated[
        datetime | None,
        msgspec.Meta(
            description="When the event the memory tells of happened, to order results by "
            '("which came first", "how long between"): the one date the context block, the '
            "profile and MCP state for it too. A memory from a message: its `event_time` (its "
            'own words resolved when written against the message\'s time, "last month"); a '
            "memory written directly: the time its content names, resolved when written "
            "against its `event_time` as when it was said, else `event_time`; else when it was "
            "stored."
        ),
    ] = None


class IndexLagOut(msgspec.Struct):
    """How far the BM25 index was behind Postgres for this user when the search ran."""

    pending: Annotated[
        int,
        msgspec.Meta(
            description="This user's changes committed but maybe not yet searchable in the BM25 "
            "index: not yet delivered to it, or delivered within its refresh window "
            "(`unrefreshed`)."
        ),
    ]
    unrefreshed: Annotated[
        int,
        msgspec.Meta(
            description="Of `pending`: delivered to the index less than its refresh interval "
            "(plus a second) ago, so a search may not see them yet."
        ),
    ]
    oldest_pending_age_ms: Annotated[
        float | None, msgspec.Meta(description="Age of the oldest of them; null when none.")
    ]
    consistency: Consistency
    stale: Annotated[
        bool,
        msgspec.Meta(
            description="True when the BM25 leg may have missed or shown an older state of "
            'this user\'s memories: changes were pending ("eventual"), the "indexed" wait '
            "ran out before they were delivered and searchable, or the index was found behind "
            "Postgres (`/ready` `index`); or when a read replica served the search before "
            "replaying every write committed before it (either leg may miss them). Otherwise "
            "false when the BM25 stage was switched off."
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
    sentences_pending: Annotated[
        int,
        msgspec.Meta(
            description="How many results were ranked without their sentence vectors (lever "
            "`sentence_vector`): memories of a write past COGNIS_SENTENCE_VECTORS_AT_WRITE "
            "whose sentences the background has not embedded yet. 0: every result was ranked "
            "with every signal its profile reads."
        ),
    ] = 0
    query_analysis: dict[str, Any] | None = None
