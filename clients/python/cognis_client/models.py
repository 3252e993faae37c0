"""Typed results: the API's JSON bodies decoded into frozen structs."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal
from uuid import UUID

import msgspec

Scope = Literal["USER", "CONTEXT"]
Consistency = Literal["eventual", "indexed"]


class Memory(msgspec.Struct, frozen=True):
    """One version of a memory. `id` is the memory's, the same for its whole life (updates
    and the delete keep it): keep it, and pass it to `update_memory`, `delete_memory`,
    `get_memory` and `history`. `version_id` is this version's own (`if_match=` takes it, or
    the Memory itself). `chain_id`: deprecated, the same as `id`."""

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
    # When the fact ended in the world (server 0016+); None: not ended.
    event_end: datetime | None = None
    # When the memory expires (server 0017+); None: never.
    expires_at: datetime | None = None
    # The agent and run it belongs to (server 0017+); None: shared by all agents, no run.
    agent_id: str | None = None
    run_id: str | None = None
    # The previous turn(s) of its session it was embedded with, when it has any.
    context: str | None = None
    # Its language, ISO 639-1, given or detected (server 0028+); None: no letters in it.
    language: str | None = None
    # This version's id (server 0029+). None from an older server, whose `id` was the
    # version's own and changed with every update.
    version_id: UUID | None = None


class MemoryPage(msgspec.Struct, frozen=True):
    items: list[Memory]
    next_cursor: str | None


class MemoriesDeleted(msgspec.Struct, frozen=True):
    """What `delete_memories` ended: each memory's current version, its history kept."""

    user_id: str
    deleted: int
    ids: list[UUID]  # the memories' lasting ids


class History(msgspec.Struct, frozen=True):
    """Every version of a memory, oldest first. `id`: the memory's (server 0029+; None
    before); `chain_id`: deprecated, the same."""

    chain_id: UUID
    versions: list[Memory]
    id: UUID | None = None

    @property
    def current(self) -> Memory | None:
        return next((v for v in self.versions if v.is_current), None)


class StageScore(msgspec.Struct, frozen=True):
    """A result's rank and score at one retrieval stage (None where the stage did not see it)."""

    rank: int | None
    score: float | None


class SearchHit(msgspec.Struct, frozen=True):
    memory: Memory
    rank: int
    score: float  # orders this search's results; means nothing beyond them
    superseded: bool
    history_of: UUID | None = None
    explanation: dict[str, StageScore] | None = None
    # The query's cosine to the memory on a fixed 0-1 scale: comparable across searches
    # (None when the search switched its vector stage off).
    relevance: float | None = None
    # When the event the memory tells of happened (the time its content names, else its
    # event_time, else when stored): what to order "which came first" answers by.
    event_at: datetime | None = None
    # A newer current memory contradicts this one (another value of the same single-valued
    # fact, or its end): this is the earlier fact; `later_memory_id` is the newer one's id.
    earlier: bool = False
    later_memory_id: UUID | None = None

    def stage(self, name: str) -> StageScore | None:
        """This hit at one stage, when explained: "256d", "768d", "bm25", "rrf", "relevance",
        "final", and the levers' and later stages' names (docs/retrieval.md, "Reading an
        explanation"); None where the hit was not in that stage's list."""
        return (self.explanation or {}).get(name)


class IndexLag(msgspec.Struct, frozen=True):
    pending: int
    oldest_pending_age_ms: float | None
    consistency: str
    stale: bool
    waited_ms: float | None = None
    # Of `pending`: delivered to the index within its refresh window, maybe not visible yet.
    unrefreshed: int = 0


class SearchResult(msgspec.Struct, frozen=True):
    results: list[SearchHit]
    missing_legs: list[str]
    stages: dict[str, str]
    stage_durations_ms: dict[str, float]
    duration_ms: float
    index_lag: IndexLag
    # Results ranked without their sentence vectors (not embedded yet): a later search may
    # rank them higher.
    sentences_pending: int = 0
    query_analysis: dict[str, Any] | None = None

    @property
    def memories(self) -> list[Memory]:
        return [hit.memory for hit in self.results]


class Decision(msgspec.Struct, frozen=True):
    """What ingestion decided for one fact of a message (ADD, UPDATE, DELETE or NONE)."""

    operation: str
    target_memory_id: UUID | None
    memory_id: UUID | None
    content: str | None
    category: str | None
    reason: str | None
    event_time: datetime | None = None
    extractor: str | None = None
    model: str | None = None
    fallback_used: bool = False
    failure: str | None = None
    raw_answer_sha256: str | None = None
    latency_ms: float | None = None
    prompt_version: str | None = None
    # The LLM gate's verdict on this fact (decided without a call, or let through) and the
    # similarity it judged by.
    llm_gate: str | None = None
    gate_similarity: float | None = None


class MessageResult(msgspec.Struct, frozen=True):
    message_id: UUID
    sent_at: datetime
    state: str
    attempts: int
    last_error: str | None
    decisions: list[Decision]


class SubmittedMessage(msgspec.Struct, frozen=True):
    message_id: UUID
    job_id: UUID
    duplicate: bool


class Job(msgspec.Struct, frozen=True):
    """An ingestion job: queued | running | done | failed."""

    job_id: UUID
    user_id: str
    state: str
    messages: list[MessageResult]
    submitted: list[SubmittedMessage] | None = None

    @property
    def decisions(self) -> list[Decision]:
        return [d for m in self.messages for d in m.decisions]


class BatchJob(msgspec.Struct, frozen=True):
    """A batch of memories the server accepted as a job (202: more model work than its
    deadline allowed), written later in one transaction: queued | running | done | failed.
    `items`: once done, the memories written, as a 201 lists them."""

    job_id: UUID
    user_id: str
    status: str
    memories: int
    attempts: int
    error: str | None
    created_at: datetime
    finished_at: datetime | None
    items: list[Memory] | None = None

    @property
    def state(self) -> str:
        """`status`, under the name ingestion jobs give it (wait_for_job's)."""
        return self.status


class DryRunMessage(msgspec.Struct, frozen=True):
    """What ingestion would decide for one message of a dry run (nothing is written)."""

    content: str
    sent_at: datetime
    speaker: str | None
    extractor: str
    fallback_used: bool
    failure: str | None
    decisions: list[Decision]


class DryRun(msgspec.Struct, frozen=True):
    dry_run: bool
    messages: list[DryRunMessage]

    @property
    def decisions(self) -> list[Decision]:
        return [d for m in self.messages for d in m.decisions]


class ImportLineError(msgspec.Struct, frozen=True):
    """A line an import refused: its number (from 1), the field at fault, why."""

    line: int
    field: str | None
    detail: str


class ImportSummary(msgspec.Struct, frozen=True):
    """An import's outcome: lines imported, skipped (imported before: same external_id) and
    failed (the first 100 listed in `errors`)."""

    imported: int
    skipped: int
    failed: int
    errors: list[ImportLineError]


class UserSummary(msgspec.Struct, frozen=True):
    user_id: str
    memories: int  # current memories
    versions: int  # every version
    last_change: datetime


class UserPage(msgspec.Struct, frozen=True):
    items: list[UserSummary]
    next_cursor: str | None


class Erasure(msgspec.Struct, frozen=True):
    user_id: str
    postgres: dict[str, int]
    opensearch_deleted: int | None
    opensearch_pending: bool
    erased_at: datetime | None = None
    # Deprecated, always None: a write sent after the erase is accepted (only one that began
    # before `erased_at` is refused: 409, a ConflictError).
    writes_refused_until: datetime | None = None
    guarantee: str | None = None  # what the receipt promises, in words
    # The agent and/or run a scoped erase removed; both None: the whole user.
    agent_id: str | None = None
    run_id: str | None = None


# Request bodies: fields left at UNSET are not sent, so the server's defaults apply.


class MemoryInput(msgspec.Struct, omit_defaults=True, forbid_unknown_fields=True):
    content: str
    category: str | msgspec.UnsetType = msgspec.UNSET
    scope: Scope | msgspec.UnsetType = msgspec.UNSET
    session_id: str | msgspec.UnsetType = msgspec.UNSET
    agent_id: str | msgspec.UnsetType = msgspec.UNSET
    run_id: str | msgspec.UnsetType = msgspec.UNSET
    speaker: str | msgspec.UnsetType = msgspec.UNSET
    event_time: datetime | msgspec.UnsetType = msgspec.UNSET
    metadata: dict[str, Any] | msgspec.UnsetType = msgspec.UNSET
    # When it expires (in the future), or its time to live in seconds: one of the two.
    expires_at: datetime | msgspec.UnsetType = msgspec.UNSET
    ttl_s: float | msgspec.UnsetType = msgspec.UNSET
    # The turn(s) it follows, to be embedded with it; default: derived from its session.
    context: str | msgspec.UnsetType = msgspec.UNSET
    # Its language, ISO 639-1 ("ja"); default: detected from the content.
    language: str | msgspec.UnsetType = msgspec.UNSET


class MemoryChanges(msgspec.Struct, omit_defaults=True, forbid_unknown_fields=True):
    """The fields an update changes; the new version keeps every other one."""

    content: str | msgspec.UnsetType = msgspec.UNSET
    category: str | msgspec.UnsetType = msgspec.UNSET
    scope: Scope | msgspec.UnsetType = msgspec.UNSET
    session_id: str | msgspec.UnsetType | None = msgspec.UNSET
    # None makes it shared by all of the user's agents (of no run).
    agent_id: str | msgspec.UnsetType | None = msgspec.UNSET
    run_id: str | msgspec.UnsetType | None = msgspec.UNSET
    speaker: str | msgspec.UnsetType | None = msgspec.UNSET
    event_time: datetime | msgspec.UnsetType | None = msgspec.UNSET
    # When the fact ended in the world; None clears it.
    event_end: datetime | msgspec.UnsetType | None = msgspec.UNSET
    metadata: dict[str, Any] | msgspec.UnsetType = msgspec.UNSET
    # A new expiry for the whole memory (None: it never expires), or a time to live from now.
    expires_at: datetime | msgspec.UnsetType | None = msgspec.UNSET
    ttl_s: float | msgspec.UnsetType = msgspec.UNSET
    # Its language (None: detected again from the content).
    language: str | msgspec.UnsetType | None = msgspec.UNSET


class Message(msgspec.Struct, omit_defaults=True, forbid_unknown_fields=True):
    content: str
    role: Literal["user", "assistant", "system"] = "user"
    speaker: str | msgspec.UnsetType = msgspec.UNSET
    timestamp: datetime | msgspec.UnsetType = msgspec.UNSET
    session_id: str | msgspec.UnsetType = msgspec.UNSET
    # The memories derived from the message belong to this agent and run.
    agent_id: str | msgspec.UnsetType = msgspec.UNSET
    run_id: str | msgspec.UnsetType = msgspec.UNSET
    metadata: dict[str, Any] | msgspec.UnsetType = msgspec.UNSET
    idempotency_key: str | msgspec.UnsetType = msgspec.UNSET
    scope: Scope | msgspec.UnsetType = msgspec.UNSET


class CitedMemory(msgspec.Struct, frozen=True):
    """A memory a context block states: its section, and for a change what it replaced.
    `id`: the memory's; `version_id` the version stated (server 0029+); `replaced_id` a
    version's id; `chain_id` deprecated, the same as `id`."""

    id: UUID
    chain_id: UUID
    section: Literal["relevant", "changes", "profile"]
    category: str
    content: str
    date: datetime
    replaced_id: UUID | None = None
    replaced_content: str | None = None
    version_id: UUID | None = None
    # A newer current memory contradicts this one: the block states it first and this line
    # as "(earlier; later: …)"; its id and content.
    later_id: UUID | None = None
    later_content: str | None = None


class Context(msgspec.Struct, frozen=True):
    """A prompt-ready block (`block`) and the memories it cites, within `max_tokens`."""

    block: str
    template: Literal["text", "markdown", "json"]
    cited: list[CitedMemory]
    tokens: int
    max_tokens: int
    truncated: bool


class ReplacedVersion(msgspec.Struct, frozen=True):
    """The version a current memory replaced: `id` is that version's id, as is `version_id`
    (server 0029+)."""

    id: UUID
    version: int
    content: str
    category: str
    created_at: datetime
    superseded_at: datetime | None
    version_id: UUID | None = None


class ProfileFact(msgspec.Struct, frozen=True):
    memory: Memory
    since: datetime
    replaced: ReplacedVersion | None = None


class ProfileCategory(msgspec.Struct, frozen=True):
    category: str
    count: int
    memories: list[ProfileFact]


class Profile(msgspec.Struct, frozen=True):
    """The user's current memories by category, newest first, each with what it replaced."""

    user_id: str
    categories: list[ProfileCategory]
    total: int
    last_changed_at: datetime | None


class Entity(msgspec.Struct, frozen=True):
    """A named thing of the user's memories (docs/entities.md): a person, place,
    organisation, product, title, event, group or language, with the other forms of its name
    that are the same thing, and how many current memories visible to the request name it."""

    id: UUID
    name: str
    type: str
    aliases: list[str]
    first_seen: datetime
    last_seen: datetime
    memories: int


class EntityPage(msgspec.Struct, frozen=True):
    items: list[Entity]
    next_cursor: str | None


class EntityMemories(msgspec.Struct, frozen=True):
    """An entity and the current memories that name it, newest first."""

    entity: Entity
    memories: list[Memory]
