"""What each API operation sends and what it decodes: shared by the sync and async clients."""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Generic, Literal, TypedDict, TypeVar
from urllib.parse import quote

import httpx
import msgspec

from cognis_client.errors import BatchJobFailedError, CognisError, TooMuchWorkError
from cognis_client.models import (
    BatchJob,
    Consistency,
    Context,
    DryRun,
    EntityMemories,
    EntityPage,
    Erasure,
    History,
    ImportSummary,
    Job,
    MemoriesDeleted,
    Memory,
    MemoryChanges,
    MemoryInput,
    MemoryPage,
    Message,
    Profile,
    Scope,
    SearchResult,
    UserPage,
)

T = TypeVar("T")
RETRYABLE_STATUS = 503
IDEMPOTENCY_KEY_HEADER = "Idempotency-Key"
IF_MATCH_HEADER = "If-Match"


def new_idempotency_key() -> str:
    """A key for one logical write: sent with every attempt of it, so the server does it once."""
    return str(uuid.uuid4())


@dataclass(frozen=True)
class Call(Generic[T]):
    """One logical API call: every attempt of it (the client's retries) sends the same request,
    idempotency key included."""

    method: str
    path: str
    result: type[T]
    params: dict[str, Any] = field(default_factory=dict)
    body: Any = None
    # Writes: the server replays the first response to a retry with this key.
    idempotency_key: str | None = None
    # A call that is not a write, or whose repetition changes nothing (a search, an erase).
    safe_to_repeat: bool = False
    # The body's media type; bytes bodies are sent as they are.
    content_type: str = "application/json"
    # Other request headers (If-Match).
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def repeatable(self) -> bool:
        """May be sent again after an attempt whose outcome is unknown (a timeout)."""
        return self.method == "GET" or self.safe_to_repeat or self.idempotency_key is not None

    def request(self, http: httpx.Client | httpx.AsyncClient) -> httpx.Request:
        params = {k: _param(v) for k, v in self.params.items() if v is not None}
        content = self.body if isinstance(self.body, bytes) else None
        if self.body is not None and content is None:
            content = msgspec.json.encode(self.body)
        headers = dict(self.headers)
        if content is not None:
            headers["Content-Type"] = self.content_type
        if self.idempotency_key is not None:
            headers[IDEMPOTENCY_KEY_HEADER] = self.idempotency_key
        return http.build_request(
            self.method, self.path, params=params, content=content, headers=headers
        )

    def decode(self, response: httpx.Response) -> T:
        if self.result is bytes:  # a body taken as it is (the export's JSON Lines)
            return response.content  # type: ignore[return-value]
        return msgspec.json.decode(response.content, type=self.result)


def _param(value: Any) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


@dataclass(frozen=True)
class RetryPolicy:
    """Retries of 503 answers, of 409 `idempotency_key_in_use` and of attempts whose answer
    never came (timeouts, dropped connections) when the call is safe to repeat: the server's
    Retry-After when it sends one, else exponential backoff with jitter. A wait longer than
    `max_delay_s` is not made: the error is raised."""

    max_retries: int = 3
    backoff_base_s: float = 0.5
    max_delay_s: float = 30.0

    def delay_s(self, attempt: int, retry_after_s: float | None) -> float:
        if retry_after_s is not None:
            return retry_after_s
        return self.backoff_base_s * 2**attempt * (0.5 + random.random() / 2)


def _user(user_id: str) -> str:
    return f"/v1/users/{quote(user_id, safe='')}"


def _memory(user_id: str, memory_id: Any) -> str:
    return f"{_user(user_id)}/memories/{quote(str(memory_id), safe='')}"


def add_memory(user_id: str, memory: MemoryInput, key: str | None) -> Call[Memory]:
    return Call(
        "POST",
        f"{_user(user_id)}/memories",
        Memory,
        body=memory,
        idempotency_key=key or new_idempotency_key(),
    )


class BatchAnswer(msgspec.Struct):
    """A batch create's answer: its memories (201), or the job that writes them later (202)."""

    items: list[Memory] | None = None
    job_id: uuid.UUID | None = None


def add_memories(user_id: str, memories: list[MemoryInput], key: str | None) -> Call[BatchAnswer]:
    return Call(
        "POST",
        f"{_user(user_id)}/memories/batch",
        BatchAnswer,
        body={"memories": memories},
        idempotency_key=key or new_idempotency_key(),
    )


def get_batch_job(user_id: str, job_id: Any) -> Call[BatchJob]:
    path = f"{_user(user_id)}/memories/batch/jobs/{quote(str(job_id), safe='')}"
    return Call("GET", path, BatchJob)


def batch_written(job: BatchJob) -> list[Memory]:
    """A finished batch job's memories; BatchJobFailedError if it failed."""
    if job.status == "failed" or job.items is None:
        raise BatchJobFailedError(job)
    return job.items


def split_batch(
    refusal: CognisError, memories: list[MemoryInput], key: str | None
) -> list[tuple[list[MemoryInput], str | None]] | None:
    """The parts to send instead of a batch the server refused as too much work for its
    deadline (413 with `fitting_memories`), each with its own idempotency key (the batch's
    with the part's number, so a retried part replays); None when it cannot be split."""
    fitting = refusal.fitting_memories if isinstance(refusal, TooMuchWorkError) else None
    if fitting is None or not 1 <= fitting < len(memories):
        return None
    return [
        (memories[start : start + fitting], f"{key}:{start}" if key else None)
        for start in range(0, len(memories), fitting)
    ]


def get_memory(user_id: str, memory_id: Any) -> Call[Memory]:
    return Call("GET", _memory(user_id, memory_id), Memory)


class MemoryFilters(TypedDict, total=False):
    """Which memories `list_memories` and `iter_memories` return (all optional)."""

    scope: Scope
    session_id: str
    # An agent's (or run's) memories and the user's shared ones; omitted: all of them.
    agent_id: str
    run_id: str
    category: str
    include_superseded: bool
    # The filter language (docs/api.md, "Filters"), as a plain dict: sent as JSON.
    filters: dict[str, Any]
    # Only memories whose id starts with these hex digits (4 to 32): a short id's memory.
    id_prefix: str


class ListOptions(MemoryFilters, total=False):
    limit: int
    cursor: str | None


def _query_params(options: Any) -> dict[str, Any]:
    """A listing's options as query parameters: the filter (a dict) as JSON text."""
    params: dict[str, Any] = dict(options)
    if params.get("filters") is not None:
        params["filters"] = msgspec.json.encode(params["filters"]).decode()
    return params


def list_memories(user_id: str, options: ListOptions) -> Call[MemoryPage]:
    params = _query_params(options)
    return Call("GET", f"{_user(user_id)}/memories", MemoryPage, params=params)


class ExportOptions(TypedDict, total=False):
    """Options of `export` (all optional): as the list's, and which versions, and vectors."""

    versions: Literal["current", "all"]
    vectors: bool
    agent_id: str
    run_id: str
    filters: dict[str, Any]


def export(user_id: str, options: ExportOptions) -> Call[bytes]:
    params = _query_params(options)
    return Call("GET", f"{_user(user_id)}/export", bytes, params=params)


def list_users(prefix: str | None, limit: int | None, cursor: str | None) -> Call[UserPage]:
    return Call(
        "GET", "/v1/users", UserPage, params={"prefix": prefix, "limit": limit, "cursor": cursor}
    )


def if_match(version: Memory | Any | None) -> dict[str, str]:
    """The If-Match header naming a version: a Memory (the version it is) or a version id."""
    if version is None:
        return {}
    if isinstance(version, Memory):
        # A server before 0029 sends no version_id: its `id` is the version's.
        version = version.version_id or version.id
    return {IF_MATCH_HEADER: f'"{version}"'}


def update_memory(
    user_id: str, memory_id: Any, changes: MemoryChanges, key: str | None, version: Any = None
) -> Call[Memory]:
    return Call(
        "PATCH",
        _memory(user_id, memory_id),
        Memory,
        body=changes,
        idempotency_key=key or new_idempotency_key(),
        headers=if_match(version),
    )


def delete_memory(
    user_id: str, memory_id: Any, key: str | None, version: Any = None
) -> Call[Memory]:
    return Call(
        "DELETE",
        _memory(user_id, memory_id),
        Memory,
        idempotency_key=key or new_idempotency_key(),
        headers=if_match(version),
    )


class DeleteFilters(TypedDict, total=False):
    """Which memories `delete_memories` ends (give one, or `all=True` for every memory)."""

    scope: Scope
    session_id: str
    # Exactly this agent's (or run's) memories: not the user's shared ones, unlike a list's.
    agent_id: str
    run_id: str
    category: str
    # The filter language (docs/api.md, "Filters"), as a plain dict: sent as JSON.
    filters: dict[str, Any]
    # Every memory of the user: required when no filter is given.
    all: bool


def delete_memories(user_id: str, filters: DeleteFilters, key: str | None) -> Call[MemoriesDeleted]:
    return Call(
        "DELETE",
        f"{_user(user_id)}/memories",
        MemoriesDeleted,
        params=_query_params(filters),
        idempotency_key=key or new_idempotency_key(),
    )


def history(user_id: str, memory_id: Any) -> Call[History]:
    return Call("GET", f"{_memory(user_id, memory_id)}/history", History)


class ContextOptions(TypedDict, total=False):
    """Options of `context` (all optional; the server's defaults apply)."""

    # The budget in (estimated) tokens, default 1000; the block's form.
    max_tokens: int
    template: Literal["text", "markdown", "json"]
    # As in `search`: the hits considered, who asks, the reference time, the filter.
    top_k: int
    session_id: str
    agent_id: str
    run_id: str
    as_of: datetime
    filters: dict[str, Any]
    min_relevance: float


def context(user_id: str, query: str | None, options: ContextOptions) -> Call[Context]:
    body = dict(options) if query is None else {"query": query, **options}
    return Call("POST", f"{_user(user_id)}/context", Context, body=body, safe_to_repeat=True)


class ProfileOptions(TypedDict, total=False):
    """Which memories `profile` shows (all optional), as the list's filters, and how many of
    each category (default 20)."""

    scope: Scope
    session_id: str
    agent_id: str
    run_id: str
    category: str
    filters: dict[str, Any]
    per_category: int


def profile(user_id: str, options: ProfileOptions) -> Call[Profile]:
    return Call("GET", f"{_user(user_id)}/profile", Profile, params=_query_params(options))


class EntityOptions(TypedDict, total=False):
    """Which entities `entities` lists (all optional): a type ("person", "place", ...), a
    name or alias, the memories counted (as the list's filters), and the page."""

    type: str
    name: str
    agent_id: str
    run_id: str
    filters: dict[str, Any]
    limit: int
    cursor: str


def entities(user_id: str, options: EntityOptions) -> Call[EntityPage]:
    return Call("GET", f"{_user(user_id)}/entities", EntityPage, params=_query_params(options))


class EntityMemoryOptions(TypedDict, total=False):
    """Which of an entity's memories `entity_memories` gives (all optional)."""

    session_id: str
    agent_id: str
    run_id: str
    filters: dict[str, Any]
    limit: int


def entity_memories(
    user_id: str, entity_id: uuid.UUID | str, options: EntityMemoryOptions
) -> Call[EntityMemories]:
    return Call(
        "GET",
        f"{_user(user_id)}/entities/{entity_id}/memories",
        EntityMemories,
        params=_query_params(options),
    )


class SearchOptions(TypedDict, total=False):
    """Options of `search` (all optional; the server's defaults apply)."""

    top_k: int
    session_id: str
    # The agent (or run) asking: its memories and the user's shared ones; omitted: all.
    agent_id: str
    run_id: str
    as_of: datetime
    explain: bool
    consistency: Consistency
    stages: dict[str, bool]
    # The filter language (docs/api.md, "Filters"), as a plain dict: both legs apply it.
    filters: dict[str, Any]
    # Leave out results less relevant than this (0-1, the hits' `relevance`).
    min_relevance: float
    # The retrieval profile ("paper", "default") and single levers switched on top of it.
    profile: str
    levers: dict[str, bool]
    # This request's fusion constants: {"k": 10, "weight_vector": 0.7, "weight_bm25": 0.3}.
    rrf: dict[str, float]
    # Bound of the "indexed" consistency's wait.
    wait_timeout_ms: int


def search(user_id: str, query: str, options: SearchOptions) -> Call[SearchResult]:
    return Call(
        "POST",
        f"{_user(user_id)}/search",
        SearchResult,
        body={"query": query, **options},
        safe_to_repeat=True,
    )


def add_messages(
    user_id: str, messages: list[Message], *, wait: bool, key: str | None
) -> Call[Job]:
    return Call(
        "POST",
        f"{_user(user_id)}/messages",
        Job,
        params={"wait": wait},
        body={"messages": messages},
        idempotency_key=key or new_idempotency_key(),
    )


def dry_run(user_id: str, messages: list[Message]) -> Call[DryRun]:
    return Call(
        "POST",
        f"{_user(user_id)}/messages",
        DryRun,
        params={"dry_run": True},
        body={"messages": messages},
        safe_to_repeat=True,  # writes nothing
    )


NDJSON = "application/x-ndjson"
ImportFormat = Literal["auto", "jsonl", "mem0"]


def _ndjson(lines: Iterable[dict[str, Any] | str] | bytes) -> bytes:
    if isinstance(lines, bytes):
        return lines
    return b"".join(
        (line.encode() if isinstance(line, str) else msgspec.json.encode(line)) + b"\n"
        for line in lines
    )


def import_memories(
    user_id: str,
    lines: Iterable[dict[str, Any] | str] | bytes,
    line_format: ImportFormat,
    batch_size: int | None,
) -> Call[ImportSummary]:
    return Call(
        "POST",
        f"{_user(user_id)}/import",
        ImportSummary,
        params={"format": line_format, "batch_size": batch_size},
        body=_ndjson(lines),
        content_type=NDJSON,
        # Idempotent by each line's external_id: a repeat skips what landed.
        safe_to_repeat=True,
    )


WaitFor = Literal["indexed"]


def waiting(call: Call[T], wait_for: WaitFor | None, wait_timeout_ms: int | None) -> Call[T]:
    """The write, answered only once it is searchable (`wait_for="indexed"`), or when
    `wait_timeout_ms` (default and maximum: the server's COGNIS_INDEX_WAIT_MAX_MS) passes."""
    if wait_for is None:
        return call
    params = {**call.params, "wait_for": wait_for, "wait_timeout_ms": wait_timeout_ms}
    return replace(call, params=params)


def get_job(user_id: str, job_id: Any) -> Call[Job]:
    return Call("GET", f"{_user(user_id)}/jobs/{quote(str(job_id), safe='')}", Job)


def erase_user(
    user_id: str, agent_id: str | None = None, run_id: str | None = None
) -> Call[Erasure]:
    """The whole user, or (given agent_id and/or run_id) only that agent's or run's part."""
    params = {"agent_id": agent_id, "run_id": run_id}
    return Call("DELETE", _user(user_id), Erasure, params=params, safe_to_repeat=True)


def as_messages(messages: list[Message | str | dict[str, Any]]) -> list[Message]:
    return [
        m
        if isinstance(m, Message)
        else Message(content=m)
        if isinstance(m, str)
        else msgspec.convert(m, Message)
        for m in messages
    ]


def as_memory_input(memory: MemoryInput | str | dict[str, Any], **fields: Any) -> MemoryInput:
    """A memory from its struct, its text or its dict, with `fields` (MemoryInput's: metadata,
    category, session_id, ...) set on top, as mem0's `add(text, metadata=...)` reads."""
    if isinstance(memory, MemoryInput):
        memory = msgspec.structs.asdict(memory)
    elif isinstance(memory, str):
        memory = {"content": memory}
    given = {k: v for k, v in memory.items() if v is not msgspec.UNSET}
    return msgspec.convert({**given, **fields}, MemoryInput)
