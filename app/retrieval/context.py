"""The context block's lines, gathered from the stores: the query's hits (the search pipeline,
as the search endpoint runs it), the latest changes and the user's stable facts (the profile's
reads, app/memories/profile.py), all current versions of this user's, seen as the request's
session, agent, run and filter would see them. app/retrieval/context_block.py orders, dates
and cuts them."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import Memory
from app.memories.filters import Filter, to_sql
from app.memories.profile import Fact, ProfileRepository
from app.retrieval.context_block import ContextBlock, ContextLine, Section, Template, fit_block
from app.retrieval.disagreement import Stated, later_of
from app.retrieval.pipeline import RetrievalPipeline
from app.retrieval.request import SearchRequest

# How many of each kind the block considers before the budget cuts: more would only be cut.
LATEST_CHANGES = 10
FACTS_PER_CATEGORY = 5


@dataclass(frozen=True, slots=True)
class ContextRequest:
    user_id: str
    max_tokens: int
    template: Template
    as_of: datetime
    search: SearchRequest | None = None  # None: no query, the profile and changes alone
    session_id: str | None = None
    # The request's filter within what its agent and run see (SearchRequest.scoped_filter).
    filters: Filter | None = None


def _line(section: Section, fact: Fact) -> ContextLine:
    memory, replaced = fact.memory, fact.replaced
    shows_change = section != "profile" and replaced is not None
    return ContextLine(
        section=section,
        memory_id=memory.id,
        chain_id=memory.chain_id,
        content=memory.content,
        category=memory.category,
        # The fact's one date, the same in every section and on every surface (search's
        # event_at, the profile's since, MCP): never the time its words name read again.
        date=fact.since,
        replaced=replaced.content if shows_change and replaced is not None else None,
        replaced_id=replaced.id if shows_change and replaced is not None else None,
    )


async def build_context(
    session: AsyncSession, pipeline: RetrievalPipeline, request: ContextRequest
) -> ContextBlock:
    hits: list[Memory] = []
    if request.search is not None:
        found = await pipeline.search(session, request.search)
        # History entries (earlier versions shown beside a hit) are left out: a superseded
        # version appears only as what a current one replaced.
        hits = [
            c.memory
            for c in found.results
            if c.history_of is None and c.memory is not None and c.memory.is_current
        ]
    where = to_sql(request.filters) if request.filters is not None else None
    reads = ProfileRepository(session, where)
    changes = await reads.latest_changes(request.user_id, LATEST_CHANGES, request.session_id)
    stable = await reads.current_by_category(
        request.user_id, FACTS_PER_CATEGORY, Memory.scope == "USER"
    )
    facts = {f.memory.id: f for f in await reads.facts(request.user_id, hits + changes + stable)}
    # A change is dated when it happened: the new version's own event time, else its writing.
    candidates = [
        *(_line("relevant", facts[m.id]) for m in hits),
        *(_line("changes", facts[m.id]) for m in changes),
        *(_line("profile", facts[m.id]) for m in stable),
    ]
    return fit_block(
        newer_first(candidates, facts), request.template, request.max_tokens, request.as_of
    )


def newer_first(lines: list[ContextLine], facts: dict[uuid.UUID, Fact]) -> list[ContextLine]:
    """Each line that a newer current memory contradicts marked earlier (app/retrieval/
    disagreement.py), with the newer memory's line stated just before it, in its section
    (the block states each memory once: its first line)."""
    firsts = {line.memory_id: line for line in reversed(lines)}
    later = later_of(
        [
            Stated(m.id, m.content, m.speaker, m.event_time, m.created_at)
            for m in (facts[memory_id].memory for memory_id in firsts)
        ]
    )
    if not later:
        return lines
    ordered: list[ContextLine] = []
    for line in lines:
        newer_id = later.get(line.memory_id)
        if newer_id is not None:
            newer = firsts[newer_id]
            ordered.append(replace(newer, section=line.section))
            line = replace(line, later=newer.content, later_id=newer.chain_id)
        ordered.append(line)
    return ordered
