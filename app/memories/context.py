"""Conversational context of a memory: the turns before it in its session.

A turn such as "Yes, last Friday!" means little alone. When a memory has a session, the store
records the previous turn(s) of that session as its `context` and embeds the memory together
with them (a second vector beside the content's own); the content itself is never changed.
`follows_chain_id` links the memory to the turn it follows, which neighbour expansion uses.
Retrieval decides per request whether to use any of it (app/retrieval/profiles.py).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from app.memories.domain import MemoryDraft
from app.time_expressions import primary_window


@dataclass(frozen=True, slots=True)
class Turn:
    """What a following memory needs to know about the one before it."""

    chain_id: uuid.UUID
    line: str
    context: str | None
    scope: str = "USER"


def turn_line(content: str, speaker: str | None) -> str:
    """The memory as one line of a transcript: "Speaker: content" unless it already says so."""
    if speaker and not content.startswith(speaker):
        return f"{speaker}: {content}"
    return content


def context_after(previous: Turn, turns: int, scope: str) -> str | None:
    """The context of a `scope` memory after `previous`: its last `turns` lines of transcript.

    A USER memory is shown in every session, so it never carries the text of a CONTEXT turn
    (visible in its own session only); a CONTEXT turn's own context may hold anything of its
    session. So a USER memory after a CONTEXT turn has no context (its link stays: neighbour
    expansion checks visibility when it reads)."""
    if scope == "USER" and previous.scope != "USER":
        return None
    lines = (previous.context.splitlines() if previous.context else []) + [previous.line]
    return "\n".join(lines[-turns:])


def contextual_text(draft: MemoryDraft) -> str | None:
    """What the context vector embeds: the context, then the memory's own line."""
    if not draft.context:
        return None
    return f"{draft.context}\n{turn_line(draft.content, draft.speaker)}"


def link_session_turns(
    drafts: Sequence[MemoryDraft],
    chain_ids: Sequence[uuid.UUID],
    last_turns: dict[str, Turn],
    turns: int,
) -> None:
    """Give each draft with a session its predecessor and context, in batch order.

    `last_turns` holds, per session, the stored turn the batch continues (empty for a new
    session); a draft's own `context`, when the caller gave one, is kept. `chain_ids` are the
    chain ids the drafts' rows will have."""
    previous = dict(last_turns)
    for draft, chain_id in zip(drafts, chain_ids, strict=True):
        if draft.session_id is None:
            continue
        before = previous.get(draft.session_id)
        if before is not None:
            draft.follows_chain_id = before.chain_id
            if draft.context is None and turns > 0:
                draft.context = context_after(before, turns, draft.scope)
        previous[draft.session_id] = Turn(
            chain_id, turn_line(draft.content, draft.speaker), draft.context, draft.scope
        )


def mentioned_time(content: str, reference: datetime | None) -> datetime | None:
    """The centre of the first time the content names, resolved once against `reference`:
    when the content was said (ingestion: the message's time in the sender's offset; a direct
    write: the memory's event time; the wall clock where it has neither)."""
    window = primary_window(content, reference or datetime.now(UTC))
    return window.center if window is not None else None
