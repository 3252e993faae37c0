"""What an agent reads about a user: the context block for its prompt, and the profile."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from litestar import Controller, Request, get, post
from litestar.params import Parameter
from sqlalchemy.ext.asyncio import AsyncSession

from app.api.contract import (
    COMMON,
    WITH_BODY,
    AgentIdQuery,
    FiltersQuery,
    RunIdQuery,
    UserId,
    problems,
)
from app.api.reads import READ_HEADERS, Reads
from app.api.schemas.context import (
    CitedOut,
    ContextBody,
    ContextOut,
    ProfileCategoryOut,
    ProfileFactOut,
    ProfileOut,
    ReplacedOut,
)
from app.api.schemas.memories import MemoryOut
from app.api.schemas.search import SearchBody
from app.api.search import search_request
from app.memories.fields import Category, Scope, SessionId, check_instant, check_user_id
from app.memories.filters import all_of, listing_filter, parse_filter, to_sql, visible_to
from app.memories.profile import Profile, ProfileRepository
from app.memories.repository import ListFilter
from app.retrieval.context import ContextRequest, build_context
from app.retrieval.context_block import ContextBlock
from app.runtime import Runtime


def _profile_out(user_id: str, profile: Profile) -> ProfileOut:
    groups: dict[str, list[ProfileFactOut]] = {}
    for fact in profile.facts:
        replaced = fact.replaced
        groups.setdefault(fact.memory.category, []).append(
            ProfileFactOut(
                memory=MemoryOut.of(fact.memory),
                since=fact.since,
                replaced=None
                if replaced is None
                else ReplacedOut(
                    id=replaced.id,
                    version_id=replaced.id,
                    version=replaced.version,
                    content=replaced.content,
                    category=replaced.category,
                    created_at=replaced.created_at,
                    superseded_at=replaced.superseded_at,
                ),
            )
        )
    return ProfileOut(
        user_id=user_id,
        categories=[
            ProfileCategoryOut(category=category, count=count, memories=groups.get(category, []))
            for category, count in profile.counts.items()
        ],
        total=sum(profile.counts.values()),
        last_changed_at=profile.last_changed_at,
    )


class ContextController(Controller):
    path = "/v1/users/{user_id:str}"
    tags = ["context"]

    @post(
        "/context",
        status_code=200,
        summary="A prompt-ready block of what is known about the user, within a token budget",
        description="The memories the query finds, then recent changes (each with what it "
        "replaced), then the user's stable facts (USER scope, the newest of each category "
        "first): current versions only, each once, dated, cut to `max_tokens`.",
        responses=problems(*WITH_BODY),
        response_headers=READ_HEADERS,
    )
    async def context(
        self, user_id: UserId, data: ContextBody, runtime: Runtime, reads: Reads, request: Request
    ) -> ContextOut:
        check_user_id(user_id)
        searched = None
        if data.query is not None:
            searched = search_request(
                user_id,
                SearchBody(
                    query=data.query,
                    top_k=data.top_k,
                    session_id=data.session_id,
                    agent_id=data.agent_id,
                    run_id=data.run_id,
                    as_of=data.as_of,
                    filters=data.filters,
                    min_relevance=data.min_relevance,
                ),
                runtime.settings.retrieval,
                request.headers.get("X-Request-ID"),
            )
            filters = searched.scoped_filter
        else:
            filters = all_of(
                parse_filter(data.filters) if data.filters is not None else None,
                visible_to(data.agent_id, data.run_id),
            )
        as_of = check_instant(data.as_of, "as_of") or datetime.now(UTC)
        asked = ContextRequest(
            user_id=user_id,
            max_tokens=data.max_tokens,
            template=data.template,
            as_of=as_of,
            search=searched,
            session_id=data.session_id,
            filters=filters,
        )

        async def build(session: AsyncSession) -> ContextBlock:
            return await build_context(session, runtime.retrieval, asked)

        block = await reads(build, fresh=False)
        return ContextOut(
            block=block.text,
            template=data.template,
            cited=[
                CitedOut(
                    id=line.chain_id,
                    version_id=line.memory_id,
                    chain_id=line.chain_id,
                    section=line.section,
                    category=line.category,
                    content=line.content,
                    date=line.date,
                    replaced_id=line.replaced_id,
                    replaced_content=line.replaced,
                    later_id=line.later_id,
                    later_content=line.later,
                )
                for line in block.lines
            ],
            tokens=block.tokens,
            max_tokens=data.max_tokens,
            truncated=block.truncated,
        )

    @get(
        "/profile",
        summary="The user's current memories by category, each with what it replaced",
        description="Categories by name, each with its count of current memories and its "
        "newest `per_category` of them, newest first; filtered as the memories list is.",
        responses=problems(*COMMON),
        response_headers=READ_HEADERS,
    )
    async def profile(
        self,
        user_id: UserId,
        reads: Reads,
        # "scope" is Litestar's reserved name for the ASGI scope, hence the alias.
        memory_scope: Annotated[Scope | None, Parameter(query="scope")] = None,
        session_id: SessionId | None = None,
        agent_id: AgentIdQuery = None,
        run_id: RunIdQuery = None,
        category: Category | None = None,
        filters: FiltersQuery = None,
        per_category: Annotated[int, Parameter(ge=1, le=200)] = 20,
    ) -> ProfileOut:
        check_user_id(user_id)
        matching = listing_filter(filters, agent_id, run_id)
        listing = ListFilter(
            scope=memory_scope,
            session_id=session_id,
            category=category,
            where=to_sql(matching) if matching is not None else None,
        )
        profile = await reads(
            lambda session: ProfileRepository(session).profile(user_id, per_category, listing),
            fresh=True,
        )
        return _profile_out(user_id, profile)
