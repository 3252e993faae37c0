"""The MCP tools: add, search, get (with history), update, delete and list memories, and the
context block."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Annotated, Any, Literal

import httpx
from cognis_client import CognisError, MemoryInput, Message, new_idempotency_key
from mcp.server.fastmcp import Context, FastMCP
from mcp.server.fastmcp.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings
from pydantic import BaseModel, Field

from app import __version__
from app.mcp_server.failures import failure_text
from app.mcp_server.identity import Caller, McpSettings, caller
from app.mcp_server.results import (
    Detail,
    MemoryIdParam,
    chain_result,
    context_result,
    job_result,
    memory_result,
    page_result,
    resolve_memory_id,
    search_result,
)
from app.mcp_server.schemas import compact_tool_schemas

INSTRUCTIONS = (
    "Long-term memory of the user you are talking to. Search it before answering questions "
    "about the user; add facts the user tells you (add_messages lets the service decide what "
    "is new, what updates an older memory and what is already known). Memories are versioned: "
    "an update keeps the earlier version in the memory's history. Results show each memory "
    "compactly, with a short id that every tool taking a memory_id accepts; detail='full' "
    "returns the stored rows."
)


class ChatMessage(BaseModel):
    content: Annotated[str, Field(description="What was said.")]
    role: Literal["user", "assistant", "system"] = "user"
    speaker: Annotated[str | None, Field(description="Name of who said it.")] = None
    timestamp: Annotated[
        datetime | None, Field(description="When it was said (ISO 8601); default: now.")
    ] = None


def _unset_if_none(**fields: Any) -> dict[str, Any]:
    return {name: value for name, value in fields.items() if value is not None}


# Every write tool takes one: the agent passes back the key an earlier call reported, so a
# retry of a write whose outcome it never learnt is done at most once.
IdempotencyKey = Annotated[
    str | None,
    Field(
        description="Only to retry a failed write: the idempotency_key its error gave.",
        max_length=256,
    ),
]


# The agent (and run) a memory belongs to. On search and list: its memories plus the user's
# shared ones (no agent); omitted, all of the user's memories.
AgentIdParam = Annotated[
    str | None,
    Field(
        description="Your agent: writes belong to it, reads see its and shared memories.",
        max_length=256,
    ),
]
RunIdParam = Annotated[
    str | None,
    Field(
        description="The run (task): writes belong to it, reads see its and run-less ones.",
        max_length=256,
    ),
]


def build_server(settings: McpSettings, *, http_path: str = "/mcp") -> FastMCP:
    """The tools, bound to a way of finding each call's user and API client."""
    server = FastMCP(
        "cognis-memory",
        instructions=INSTRUCTIONS,
        streamable_http_path=http_path,
        # Every call carries an API key checked by the API itself, so a page that rebinds DNS
        # cannot use the endpoint; deployments behind a load balancer see arbitrary Host names.
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        stateless_http=True,
        json_response=True,
    )
    # serverInfo.version: the service's, not the SDK's (FastMCP takes no version of its own).
    server._mcp_server.version = __version__

    @contextlib.asynccontextmanager
    async def api(ctx: Context, key: str | None = None) -> AsyncIterator[Caller]:
        """The caller's API client; errors become the tool's answer (with the write's
        idempotency key, `key`, so that the agent can retry it safely)."""
        try:
            async with caller(ctx, settings) as who:
                yield who
        except (CognisError, httpx.TransportError) as exc:
            raise ToolError(failure_text(exc, key)) from exc

    @server.tool()
    async def add_memory(
        ctx: Context,
        content: Annotated[str, Field(description="The fact to remember, in one sentence.")],
        category: Annotated[
            str | None,
            Field(
                description="One of the service's categories, e.g. preferences, health (an "
                "unknown one is refused with the list); default: classified from the content."
            ),
        ] = None,
        scope: Annotated[
            Literal["USER", "CONTEXT"],
            Field(description="USER: kept across sessions; CONTEXT: only for session_id."),
        ] = "USER",
        session_id: str | None = None,
        agent_id: AgentIdParam = None,
        run_id: RunIdParam = None,
        event_time: Annotated[
            datetime | None, Field(description="When the fact happened (ISO 8601).")
        ] = None,
        ttl_s: Annotated[
            float | None,
            Field(
                gt=0,
                description="Forget it after this many seconds (e.g. 86400: a day); from then "
                "on it is never returned, and it is deleted. Default: kept until changed.",
            ),
        ] = None,
        idempotency_key: IdempotencyKey = None,
        detail: Detail = "compact",
    ) -> dict[str, Any]:
        """Store one memory as given (no extraction). Returns the new memory."""
        draft = MemoryInput(
            **_unset_if_none(
                content=content,
                category=category,
                scope=scope,
                session_id=session_id,
                agent_id=agent_id,
                run_id=run_id,
                event_time=event_time,
                ttl_s=ttl_s,
            )
        )
        key = idempotency_key or new_idempotency_key()
        async with api(ctx, key) as who:
            memory = await who.client.add_memory(who.user_id, draft, idempotency_key=key)
        return memory_result(memory, detail)

    @server.tool()
    async def add_messages(
        ctx: Context,
        messages: list[ChatMessage],
        session_id: str | None = None,
        agent_id: AgentIdParam = None,
        run_id: RunIdParam = None,
        wait: Annotated[
            bool, Field(description="Wait for the memories to be written (default).")
        ] = True,
        idempotency_key: IdempotencyKey = None,
        detail: Detail = "compact",
    ) -> dict[str, Any]:
        """Send conversation messages; the service extracts memories from them and decides for
        each fact whether it is new (ADD), changes a memory (UPDATE), ends one (DELETE) or is
        known (NONE). Returns the ingestion job with its decisions."""
        batch = [
            Message(
                **_unset_if_none(
                    content=m.content,
                    role=m.role,
                    speaker=m.speaker,
                    timestamp=m.timestamp,
                    session_id=session_id,
                    agent_id=agent_id,
                    run_id=run_id,
                )
            )
            for m in messages
        ]
        key = idempotency_key or new_idempotency_key()
        async with api(ctx, key) as who:
            job = await who.client.add_messages(who.user_id, batch, wait=wait, idempotency_key=key)
        return job_result(job, detail)

    @server.tool()
    async def search_memories(
        ctx: Context,
        query: str,
        top_k: Annotated[int, Field(ge=1, le=100)] = 5,
        session_id: Annotated[
            str | None, Field(description="Also search this session's CONTEXT memories.")
        ] = None,
        agent_id: AgentIdParam = None,
        run_id: RunIdParam = None,
        explain: Annotated[
            bool, Field(description="Add each result's rank and score at every stage.")
        ] = False,
        filters: Annotated[
            dict[str, Any] | None,
            Field(
                description='Only memories matching this filter, e.g. {"field": "category", '
                '"op": "in", "value": ["preferences"]}; clauses combine with "and", "or" '
                'and "not" (docs/api.md, "Filters").'
            ),
        ] = None,
        min_relevance: Annotated[
            float | None,
            Field(
                ge=0,
                le=1,
                description="Leave out results whose relevance (0-1) is below this; none "
                "left means nothing relevant is remembered.",
            ),
        ] = None,
        detail: Detail = "compact",
    ) -> dict[str, Any]:
        """Search the user's memories (hybrid vector + BM25 retrieval, best first). Each
        result has a `relevance` from 0 to 1 that is comparable across searches."""
        options = _unset_if_none(
            top_k=top_k,
            session_id=session_id,
            agent_id=agent_id,
            run_id=run_id,
            explain=explain,
            filters=filters,
            min_relevance=min_relevance,
        )
        async with api(ctx) as who:
            # "indexed": an agent that just added a memory finds it (a bounded wait).
            found = await who.client.search(who.user_id, query, consistency="indexed", **options)
        return search_result(found, detail)

    @server.tool()
    async def get_context(
        ctx: Context,
        query: Annotated[
            str | None, Field(description="What you are about to answer; optional.")
        ] = None,
        max_tokens: Annotated[int, Field(ge=50, le=32_000)] = 1000,
        session_id: str | None = None,
        agent_id: AgentIdParam = None,
        run_id: RunIdParam = None,
    ) -> dict[str, Any]:
        """What you know about the user, as a dated block for your prompt: memories relevant
        to the query, recent changes, stable facts; within max_tokens."""
        options = _unset_if_none(
            max_tokens=max_tokens, session_id=session_id, agent_id=agent_id, run_id=run_id
        )
        async with api(ctx) as who:
            block = await who.client.context(who.user_id, query, **options)
        return context_result(block)

    @server.tool()
    async def get_memory(
        ctx: Context,
        memory_id: MemoryIdParam,
        with_history: Annotated[
            bool, Field(description="Also return every version of its chain, oldest first.")
        ] = True,
        detail: Detail = "compact",
    ) -> dict[str, Any]:
        """One memory version, and the history of its chain."""
        async with api(ctx) as who:
            full_id = await resolve_memory_id(who, memory_id)
            memory = await who.client.get_memory(who.user_id, full_id)
            history = await who.client.history(who.user_id, full_id) if with_history else None
        return chain_result(memory, history, detail)

    @server.tool()
    async def update_memory(
        ctx: Context,
        memory_id: MemoryIdParam,
        content: str | None = None,
        category: Annotated[
            str | None,
            Field(description="A new category; default: the memory keeps its category."),
        ] = None,
        event_time: datetime | None = None,
        idempotency_key: IdempotencyKey = None,
        detail: Detail = "compact",
    ) -> dict[str, Any]:
        """Change a current memory: a new version replaces it (the old one stays in history).
        Only the fields given change; new content keeps the memory's category."""
        changes = _unset_if_none(content=content, category=category, event_time=event_time)
        if not changes:
            raise ToolError("nothing to change: give content, category or event_time")
        key = idempotency_key or new_idempotency_key()
        async with api(ctx, key) as who:
            full_id = await resolve_memory_id(who, memory_id)
            memory = await who.client.update_memory(
                who.user_id, full_id, idempotency_key=key, **changes
            )
        return memory_result(memory, detail)

    @server.tool()
    async def delete_memory(
        ctx: Context,
        memory_id: MemoryIdParam,
        idempotency_key: IdempotencyKey = None,
        detail: Detail = "compact",
    ) -> dict[str, Any]:
        """End a memory: it is no longer returned, but stays in its chain's history."""
        key = idempotency_key or new_idempotency_key()
        async with api(ctx, key) as who:
            full_id = await resolve_memory_id(who, memory_id)
            memory = await who.client.delete_memory(who.user_id, full_id, idempotency_key=key)
        return memory_result(memory, detail)

    @server.tool()
    async def list_memories(
        ctx: Context,
        category: str | None = None,
        scope: Literal["USER", "CONTEXT"] | None = None,
        session_id: str | None = None,
        agent_id: AgentIdParam = None,
        run_id: RunIdParam = None,
        include_superseded: bool = False,
        limit: Annotated[int, Field(ge=1, le=200)] = 20,
        cursor: Annotated[
            str | None, Field(description="next_cursor of the previous page.")
        ] = None,
        detail: Detail = "compact",
    ) -> dict[str, Any]:
        """The user's memories, newest first, a page at a time."""
        options = _unset_if_none(
            category=category,
            scope=scope,
            session_id=session_id,
            agent_id=agent_id,
            run_id=run_id,
            include_superseded=include_superseded,
            limit=limit,
            cursor=cursor,
        )
        async with api(ctx) as who:
            page = await who.client.list_memories(who.user_id, **options)
        return page_result(page, detail)

    compact_tool_schemas(server)
    return server
