"""The MCP tools: add, search, get (with history), update, delete and list memories, the
context block, and the entities (the people, places and things the memories name)."""

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
    chain_result,
    compact_entity,
    context_result,
    entity_memories_result,
    job_result,
    memory_result,
    page_result,
    resolve_entity_id,
    resolve_memory_id,
    result_text,
    search_result,
)
from app.mcp_server.schemas import compact_tool_schemas

INSTRUCTIONS = (
    "Long-term memory of the user you talk to. Search it before answering about them; add what "
    "they tell you (add_messages: the service decides what is new, changed or known). Updates "
    "and deletes keep old versions as history. memory_id: a result's short id. filters: "
    '{"field": "category", "op": "eq", "value": "health"}, or "and", "or", "not" of such. '
    "full=true: stored rows. idempotency_key: only when an error says so."
)


class ChatMessage(BaseModel):
    content: str
    role: Literal["user", "assistant", "system"] = "user"
    speaker: str | None = None  # who said it, by name
    timestamp: datetime | None = None  # when it was said; default: now


def _unset_if_none(**fields: Any) -> dict[str, Any]:
    return {name: value for name, value in fields.items() if value is not None}


# Arguments several tools share. The agent and run come from the connection (identity.py); the
# conventions (short ids, filters, full, idempotency keys) are stated once, in INSTRUCTIONS,
# rather than in every tool's schema: the agent reads the listing in every session.
# A write's key: the agent passes back the one an earlier call's error reported, so a retry of
# a write whose outcome it never learnt is done at most once (the API checks its form).
IdempotencyKey = str | None
# The API's rows (ids, times, agent, run, provenance) instead of the compact memories.
Full = bool
# The conversation: its messages' session; reads see its session-only memories too.
SessionId = str | None
Filters = dict[str, Any] | None
# The service's entity types (docs/entities.md).
EntityType = (
    Literal["person", "place", "organisation", "product", "title", "event", "group", "language"]
    | None
)


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

    def tool(fn: Any) -> Any:
        # Text results only: a structured copy (and its output schema in the listing) would
        # make the agent pay for every result twice.
        return server.tool(structured_output=False)(fn)

    @tool
    async def add_memory(
        ctx: Context,
        content: str,
        category: str | None = None,
        session_id: Annotated[
            str | None, Field(description="Keep it for this conversation only.")
        ] = None,
        event_time: datetime | None = None,
        ttl_s: Annotated[
            float | None, Field(gt=0, description="Forget it after this many seconds.")
        ] = None,
        idempotency_key: IdempotencyKey = None,
        full: Full = False,
    ) -> str:
        """Store one fact as given (default category: classified)."""
        key = idempotency_key or new_idempotency_key()
        async with api(ctx, key) as who:
            draft = MemoryInput(
                **_unset_if_none(
                    content=content,
                    category=category,
                    scope="CONTEXT" if session_id else None,
                    session_id=session_id,
                    event_time=event_time,
                    ttl_s=ttl_s,
                    **who.scope,
                )
            )
            memory = await who.client.add_memory(who.user_id, draft, idempotency_key=key)
        return result_text(memory_result(memory, full))

    @tool
    async def add_messages(
        ctx: Context,
        messages: list[ChatMessage],
        session_id: SessionId = None,
        wait: bool = True,
        idempotency_key: IdempotencyKey = None,
        full: Full = False,
    ) -> str:
        """Send conversation messages; the service extracts facts and ADDs, UPDATEs or
        DELETEs memories."""
        key = idempotency_key or new_idempotency_key()
        async with api(ctx, key) as who:
            batch = [
                Message(
                    **_unset_if_none(
                        content=m.content,
                        role=m.role,
                        speaker=m.speaker,
                        timestamp=m.timestamp,
                        session_id=session_id,
                        **who.scope,
                    )
                )
                for m in messages
            ]
            job = await who.client.add_messages(who.user_id, batch, wait=wait, idempotency_key=key)
        return result_text(job_result(job, full))

    @tool
    async def search_memories(
        ctx: Context,
        query: str,
        top_k: Annotated[int, Field(ge=1, le=100)] = 5,
        session_id: SessionId = None,
        filters: Filters = None,
        min_relevance: Annotated[float | None, Field(ge=0, le=1)] = None,
        explain: bool = False,
        full: Full = False,
    ) -> str:
        """Search, best first, with relevance (0-1)."""
        options = _unset_if_none(
            top_k=top_k,
            session_id=session_id,
            explain=explain,
            filters=filters,
            min_relevance=min_relevance,
        )
        async with api(ctx) as who:
            # "indexed": an agent that just added a memory finds it (a bounded wait).
            found = await who.client.search(
                who.user_id, query, consistency="indexed", **options, **who.scope
            )
        return result_text(search_result(found, full))

    @tool
    async def get_context(
        ctx: Context,
        query: str | None = None,
        max_tokens: Annotated[int, Field(ge=50, le=32_000)] = 1000,
        session_id: SessionId = None,
    ) -> str:
        """What you know about the user, as a block for your prompt."""
        async with api(ctx) as who:
            options = _unset_if_none(max_tokens=max_tokens, session_id=session_id, **who.scope)
            block = await who.client.context(who.user_id, query, **options)
        return result_text(context_result(block))

    @tool
    async def get_memory(
        ctx: Context, memory_id: str, with_history: bool = True, full: Full = False
    ) -> str:
        """A memory and its versions, oldest first."""
        async with api(ctx) as who:
            full_id = await resolve_memory_id(who, memory_id)
            memory = await who.client.get_memory(who.user_id, full_id)
            history = await who.client.history(who.user_id, full_id) if with_history else None
        return result_text(chain_result(memory, history, full))

    @tool
    async def update_memory(
        ctx: Context,
        memory_id: str,
        content: str | None = None,
        category: str | None = None,
        event_time: datetime | None = None,
        idempotency_key: IdempotencyKey = None,
        full: Full = False,
    ) -> str:
        """Change the fields given; the old version stays in history."""
        changes = _unset_if_none(content=content, category=category, event_time=event_time)
        if not changes:
            raise ToolError("nothing to change: give content, category or event_time")
        key = idempotency_key or new_idempotency_key()
        async with api(ctx, key) as who:
            full_id = await resolve_memory_id(who, memory_id)
            memory = await who.client.update_memory(
                who.user_id, full_id, idempotency_key=key, **changes
            )
        return result_text(memory_result(memory, full))

    @tool
    async def delete_memory(
        ctx: Context, memory_id: str, idempotency_key: IdempotencyKey = None, full: Full = False
    ) -> str:
        """End a memory; it stays in history."""
        key = idempotency_key or new_idempotency_key()
        async with api(ctx, key) as who:
            full_id = await resolve_memory_id(who, memory_id)
            memory = await who.client.delete_memory(who.user_id, full_id, idempotency_key=key)
        return result_text(memory_result(memory, full))

    @tool
    async def list_memories(
        ctx: Context,
        filters: Filters = None,
        include_superseded: bool = False,
        limit: Annotated[int, Field(ge=1, le=200)] = 20,
        cursor: str | None = None,
        full: Full = False,
    ) -> str:
        """Memories, newest first; cursor: the last page's next_cursor."""
        options = _unset_if_none(
            filters=filters, include_superseded=include_superseded, limit=limit, cursor=cursor
        )
        async with api(ctx) as who:
            page = await who.client.list_memories(who.user_id, **options, **who.scope)
        return result_text(page_result(page, full))

    @tool
    async def list_entities(
        ctx: Context,
        type: EntityType = None,
        name: str | None = None,
        limit: Annotated[int, Field(ge=1, le=200)] = 20,
        cursor: str | None = None,
        full: Full = False,
    ) -> str:
        """People, places and other things the memories name, with counts. name (or an
        alias): that one and its memories, newest first."""
        async with api(ctx) as who:
            if name is None:
                options = _unset_if_none(type=type, limit=limit, cursor=cursor)
                page = await who.client.entities(who.user_id, **options, **who.scope)
                return result_text(page_result(page, full, compact_entity))
            entity_id = await resolve_entity_id(who, name, type)
            found = await who.client.entity_memories(
                who.user_id, entity_id, limit=limit, **who.scope
            )
        return result_text(entity_memories_result(found, full))

    compact_tool_schemas(server)
    return server
