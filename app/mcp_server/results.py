"""What the MCP tools answer: compact by default, the API's full rows on request.

A full memory row is about 500 characters, mostly UUIDs, timestamps and nulls, and an agent
pays for every one in its context window. A compact memory is what the model reads and needs
to act on it: its content, category, event time and a short id (the first hex digits of its
id, which every tool taking a memory id accepts). `full=true` returns the rows as the REST
API does. docs/mcp.md has the characters per result of each.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable
from typing import Any

import msgspec
from cognis_client import (
    Context,
    Entity,
    EntityMemories,
    EntityPage,
    History,
    Job,
    Memory,
    MemoryPage,
    SearchResult,
)
from mcp.server.fastmcp.exceptions import ToolError

from app.mcp_server.identity import Caller

# 8 hex digits: 32 random bits of a UUIDv4, so two of one user's memories share a short id
# about once in 4 billion pairs (with 10,000 memories, about one chance in 86 that any pair
# does); a clash is answered with the candidates, never guessed.
SHORT_ID_DIGITS = 8
# How many memories sharing a short id an ambiguity error lists.
MAX_CANDIDATES = 10
# What the API takes as the start of an id (GET .../memories?id_prefix=).
_SHORT_ID = re.compile("[0-9a-fA-F]{4,32}")


def plain(value: Any) -> Any:
    return msgspec.to_builtins(value)


def result_text(result: dict[str, Any]) -> str:
    """A tool's answer as the model reads it: JSON without indentation (FastMCP's own
    rendering of a dict indents it, spaces the agent would pay for in every result)."""
    return json.dumps(result, ensure_ascii=False, separators=(",", ":"), default=str)


def short_id(memory_id: uuid.UUID) -> str:
    return memory_id.hex[:SHORT_ID_DIGITS]


def compact_memory(memory: Memory) -> dict[str, Any]:
    """What an agent reads of a memory; fields that are empty or usual are left out."""
    out: dict[str, Any] = {
        "id": short_id(memory.id),
        "content": memory.content,
        "category": memory.category,
    }
    if memory.event_time is not None:
        out["event_time"] = plain(memory.event_time)
    if memory.event_end is not None:
        out["event_end"] = plain(memory.event_end)
    if memory.expires_at is not None:
        out["expires_at"] = plain(memory.expires_at)
    if not memory.is_current:
        out["current"] = False
    return out


def memory_result(memory: Memory, full: bool) -> dict[str, Any]:
    return plain(memory) if full else compact_memory(memory)


def search_result(found: SearchResult, full: bool) -> dict[str, Any]:
    if full:
        return {
            "results": plain(found.results),
            "query_analysis": found.query_analysis,
            "missing_legs": found.missing_legs,
        }
    results = []
    for hit in found.results:
        one = compact_memory(hit.memory)
        if hit.event_at is not None and hit.event_at != hit.memory.event_time:
            # The fact's date where it is not its event_time (a direct write that names another
            # time, "yesterday"): the date the context block and the profile state too.
            one["event_at"] = plain(hit.event_at)
        if hit.relevance is not None:
            one["relevance"] = round(hit.relevance, 3)
        if hit.earlier and hit.later_memory_id is not None:
            # A newer memory (ranked above) contradicts this one: the agent should use that.
            one["earlier"] = True
            one["later_id"] = short_id(hit.later_memory_id)
        if hit.explanation is not None:
            one["explanation"] = plain(hit.explanation)
        results.append(one)
    out: dict[str, Any] = {"results": results}
    if found.missing_legs:  # a degraded search says so: results may be missing
        out["missing_legs"] = found.missing_legs
    return out


def page_result(
    page: MemoryPage | EntityPage,
    full: bool,
    compact: Callable[[Any], dict[str, Any]] = compact_memory,
) -> dict[str, Any]:
    """A page of memories (or, with `compact_entity`, of entities): each item compact, and
    the cursor of the next page."""
    if full:
        return plain(page)  # type: ignore[no-any-return]
    out: dict[str, Any] = {"items": [compact(item) for item in page.items]}
    if page.next_cursor is not None:
        out["next_cursor"] = page.next_cursor
    return out


def context_result(block: Context) -> dict[str, Any]:
    """The block as the agent pastes it, and the short ids of the memories it states."""
    return {
        "block": block.block,
        "memory_ids": [short_id(c.id) for c in block.cited],
        "tokens": block.tokens,
        "truncated": block.truncated,
    }


def compact_entity(entity: Entity) -> dict[str, Any]:
    """What an agent reads of an entity: its name (what list_entities' `name` takes), type,
    other names, and how many memories name it."""
    out: dict[str, Any] = {"name": entity.name, "type": entity.type}
    if entity.aliases:
        out["aliases"] = entity.aliases
    out["memories"] = entity.memories
    return out


def entity_memories_result(found: EntityMemories, full: bool) -> dict[str, Any]:
    if full:
        return plain(found)  # type: ignore[no-any-return]
    return {
        "entity": compact_entity(found.entity),
        "memories": [compact_memory(m) for m in found.memories],
    }


def chain_result(memory: Memory, history: History | None, full: bool) -> dict[str, Any]:
    if full:
        return {"memory": plain(memory), "history": plain(history.versions) if history else None}
    out: dict[str, Any] = {"memory": {**compact_memory(memory), "version": memory.version}}
    if history is not None:
        out["history"] = [{**compact_memory(v), "version": v.version} for v in history.versions]
    return out


def job_result(job: Job, full: bool) -> dict[str, Any]:
    if full:
        return plain(job)  # type: ignore[no-any-return]
    decisions = []
    for decision in job.decisions:
        one: dict[str, Any] = {"operation": decision.operation}
        if decision.memory_id is not None:
            one["id"] = short_id(decision.memory_id)
        if decision.target_memory_id not in (None, decision.memory_id):
            one["target"] = short_id(decision.target_memory_id)  # type: ignore[arg-type]
        if decision.content is not None:
            one["content"] = decision.content
        decisions.append(one)
    out: dict[str, Any] = {"job_id": str(job.job_id), "state": job.state, "decisions": decisions}
    failed = [m.last_error for m in job.messages if m.last_error]
    if failed:
        out["errors"] = failed
    return out


async def resolve_memory_id(who: Caller, memory_id: str) -> str:
    """The full id a tool argument names: a UUID as it is, else the one memory of this user
    whose id, or one of whose versions' ids, starts with it (looked up through the API, so
    only among the user's own)."""
    try:
        return str(uuid.UUID(memory_id))
    except ValueError:
        pass
    if not _SHORT_ID.fullmatch(memory_id.replace("-", "")):
        raise ToolError(
            f"memory_id {memory_id[:64]!r} is not a memory id: pass the short id (8 hex "
            "digits) or the full id exactly as a search_memories or list_memories result showed it"
        )
    page = await who.client.list_memories(
        who.user_id, id_prefix=memory_id, include_superseded=True, limit=MAX_CANDIDATES
    )
    if not page.items:
        raise ToolError(
            f"no memory has an id starting with {memory_id!r}: pass the id exactly as a "
            "search_memories or list_memories result showed it"
        )
    # One row per version listed: the versions of one memory share its id.
    memories = list({m.id: m for m in reversed(page.items)}.values())
    if len(memories) > 1:
        candidates = "; ".join(
            f"{m.id} ({'current' if m.is_current else 'superseded'}, {m.content[:60]!r})"
            for m in memories
        )
        raise ToolError(
            f"{memory_id!r} is the start of {len(memories)} memories' ids: {candidates}. "
            "Call again with the full id of the one you mean."
        )
    return str(memories[0].id)


async def resolve_entity_id(who: Caller, entity: str, entity_type: str | None) -> str:
    """The id of the entity a tool argument names: a UUID as it is (a full listing's id), else
    the one entity of this user (of `entity_type`, if given) that has it as its name or an
    alias, any case (looked up through the API, so only among the user's own)."""
    try:
        return str(uuid.UUID(entity))
    except ValueError:
        pass
    options = {"type": entity_type} if entity_type else {}
    page = await who.client.entities(
        who.user_id, name=entity, limit=MAX_CANDIDATES, **options, **who.scope
    )
    if not page.items:
        kind = f"{entity_type} " if entity_type else ""
        raise ToolError(
            f"no {kind}entity of this user is called {entity[:64]!r}: pass a name or alias "
            "exactly as list_entities showed it"
        )
    if len(page.items) > 1:
        candidates = "; ".join(f"{e.name} ({e.type})" for e in page.items)
        raise ToolError(
            f"{entity!r} names {len(page.items)} entities: {candidates}. "
            "Call again with the type of the one you mean."
        )
    return str(page.items[0].id)
