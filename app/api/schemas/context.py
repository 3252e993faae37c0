"""Wire schemas of the context block and the profile."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any
from uuid import UUID

import msgspec

from app.api.schemas.memories import ChainId, MemoryId, MemoryOut
from app.api.schemas.search import MinRelevance
from app.memories.fields import AgentId, Instant, RunId, SessionId, TopK
from app.memories.filters import FILTER_JSON_SCHEMA
from app.retrieval.context_block import Section, Template
from app.vocabulary import MAX_CONTENT_CHARS

DEFAULT_MAX_TOKENS = 1000
MaxTokens = Annotated[
    int,
    msgspec.Meta(
        ge=50,
        le=32_000,
        description="The block's budget in tokens, estimated as one per 4 ASCII characters "
        "plus one per other character (docs/context.md).",
    ),
]


class ContextBody(msgspec.Struct, forbid_unknown_fields=True):
    query: Annotated[
        Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_CONTENT_CHARS)] | None,
        msgspec.Meta(
            description="What the agent is about to answer: the memories it finds come first. "
            "Omitted: the user's profile and latest changes alone.",
        ),
    ] = None
    max_tokens: MaxTokens = DEFAULT_MAX_TOKENS
    template: Annotated[
        Template, msgspec.Meta(description="The block's form: plain text, Markdown or JSON.")
    ] = "text"
    top_k: Annotated[
        TopK | None, msgspec.Meta(description="Search results considered (as in search).")
    ] = None
    session_id: SessionId | None = None
    agent_id: Annotated[
        AgentId | None,
        msgspec.Meta(description="As in search: the agent's memories and the shared ones."),
    ] = None
    run_id: Annotated[
        RunId | None, msgspec.Meta(description="As in search: the run's and those of no run.")
    ] = None
    as_of: Annotated[
        Instant | None,
        msgspec.Meta(description="The query's reference time (as in search); default: now."),
    ] = None
    filters: Annotated[
        dict[str, Any] | None,
        msgspec.Meta(
            description="Only memories matching this filter are cited. "
            + FILTER_JSON_SCHEMA["description"],
        ),
    ] = None
    min_relevance: MinRelevance | None = None


class CitedOut(msgspec.Struct):
    id: MemoryId
    version_id: Annotated[
        UUID, msgspec.Meta(description="The version the block states (always the current one).")
    ]
    chain_id: ChainId
    section: Annotated[
        Section,
        msgspec.Meta(
            description="relevant: found for the query; changes: updated lately; profile: "
            "one of the user's stable facts."
        ),
    ]
    category: str
    content: str
    date: Annotated[
        datetime,
        msgspec.Meta(
            description="The date the block gives: when the fact began or changed (the "
            "version's event date, the one search's `event_at`, the profile and MCP state; "
            "else when it was written)."
        ),
    ]
    replaced_id: Annotated[
        UUID | None,
        msgspec.Meta(description="The version a change replaced: a version id."),
    ] = None
    replaced_content: str | None = None
    later_id: Annotated[
        UUID | None,
        msgspec.Meta(
            description="Set when a newer current memory contradicts this one (the block "
            "marks the line earlier and states the newer one before it): the newer memory's id."
        ),
    ] = None
    later_content: str | None = None


class ContextOut(msgspec.Struct):
    block: Annotated[str, msgspec.Meta(description="Prompt-ready; empty when nothing is known.")]
    template: Template
    cited: Annotated[
        list[CitedOut], msgspec.Meta(description="The memories the block states, in its order.")
    ]
    tokens: int
    max_tokens: int
    truncated: Annotated[
        bool, msgspec.Meta(description="Memories were left out to stay within max_tokens.")
    ]


class ReplacedOut(msgspec.Struct):
    """The version a current memory replaced (of the same memory: its id is the fact's)."""

    id: Annotated[
        UUID, msgspec.Meta(description="The replaced version's id: equal to `version_id`.")
    ]
    version_id: UUID
    version: int
    content: str
    category: str
    created_at: datetime
    superseded_at: datetime | None


class ProfileFactOut(msgspec.Struct):
    memory: MemoryOut
    since: Annotated[
        datetime,
        msgspec.Meta(
            description="Since when it holds: the version's event date (search's `event_at`, "
            "the context block's date) when it brought its own, else when the version was "
            "written."
        ),
    ]
    replaced: ReplacedOut | None = None


class ProfileCategoryOut(msgspec.Struct):
    category: str
    count: Annotated[int, msgspec.Meta(description="Current memories of the category.")]
    memories: Annotated[
        list[ProfileFactOut], msgspec.Meta(description="Newest first, at most per_category.")
    ]


class ProfileOut(msgspec.Struct):
    user_id: str
    categories: list[ProfileCategoryOut]
    total: Annotated[int, msgspec.Meta(description="Current memories in all categories.")]
    last_changed_at: Annotated[
        datetime | None,
        msgspec.Meta(description="The latest version written, updated or deleted."),
    ]
