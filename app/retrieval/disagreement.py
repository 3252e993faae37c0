"""Newer first (lever `newer_first`): of two current memories that contradict each other (one
value of a single-valued fact against another, or a fact against its own end: app/retrieval/
fact_claims.py), the newer ranks no lower than the older, and the older is marked earlier.

Ingestion supersedes an old fact when it sees the new one replace it; this is the net for the
pairs it missed (the new fact said without a cue, or the old one not among the memories it was
shown), so a replaced fact never passes as current: the search marks it (`earlier`, with the
newer memory's id) and the context block says so on its line. "Newer" is by event time, then
by when it was stored; two memories of the same times are not ordered, and not marked.

Plain data in and out: the detector takes (key, content, speaker, times) and gives, for each
memory that a newer one contradicts, the newest of those.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TypeVar

from app.retrieval.candidates import Candidate
from app.retrieval.fact_claims import Claim, claims_of, contradicts
from app.retrieval.plan import Lever

K = TypeVar("K", bound=Hashable)

NEWER_FIRST = Lever(
    "newer_first",
    "Of two current memories that contradict each other (where the user lives, works, their "
    "job, partner, age, field of study or diet, or a fact and its end), the newer ranks above "
    "the older, which is marked `earlier` with the newer one's id.",
)


@dataclass(frozen=True, slots=True)
class Stated:
    """One current memory as the detector reads it."""

    key: uuid.UUID  # the memory version's id
    content: str
    speaker: str | None
    event_time: datetime | None
    created_at: datetime

    @property
    def newness(self) -> tuple[datetime, datetime]:
        return (self.event_time or self.created_at, self.created_at)


def _subject(claim: Claim, speaker: str | None) -> str:
    """Whose fact: "I" is the memory's speaker (so two speakers' "I live in …" are two
    people's), a relative is the speaker's, a name is that person (the speaker's own name
    too)."""
    who = (speaker or "").strip().lower()
    if claim.subject == "i":
        return who or "i"
    if claim.subject.startswith("my "):
        return f"{who}'s {claim.subject[3:]}"
    return claim.subject


def later_of(memories: Sequence[Stated]) -> dict[uuid.UUID, uuid.UUID]:
    """For each memory that a newer one contradicts, the key of the newest that does. Only
    claims of one person and one relation are compared (a bucket each)."""
    buckets: dict[tuple[str, str], list[tuple[Stated, Claim]]] = defaultdict(list)
    for memory in memories:
        for claim in claims_of(memory.content):
            buckets[(_subject(claim, memory.speaker), claim.relation)].append((memory, claim))
    later: dict[uuid.UUID, Stated] = {}
    for stated_claims in buckets.values():
        for i, (a, claim_a) in enumerate(stated_claims):
            for b, claim_b in stated_claims[i + 1 :]:
                if a.newness == b.newness or not contradicts(claim_a, claim_b):
                    continue
                older, newer = (a, b) if a.newness < b.newness else (b, a)
                known = later.get(older.key)
                if known is None or known.newness < newer.newness:
                    later[older.key] = newer
    return {key: newer.key for key, newer in later.items()}


def newer_above(ordered: list[K], later: dict[K, K]) -> list[K]:
    """`ordered` with each newer item moved up to just above the highest older item it
    contradicts, when it was below; nothing else moves. (Moves only go up, to above an
    older item, so the loop ends.)"""
    ordered = list(ordered)
    moved = True
    while moved:
        moved = False
        position = {item: index for index, item in enumerate(ordered)}
        for item in ordered:
            newer = later.get(item)
            if newer is not None and newer in position and position[newer] > position[item]:
                ordered.remove(newer)
                ordered.insert(position[item], newer)
                moved = True
                break
    return ordered


def stated(candidate: Candidate) -> Stated:
    memory = candidate.memory
    assert memory is not None  # loaded
    return Stated(
        candidate.memory_id, memory.content, memory.speaker, memory.event_time, memory.created_at
    )


def mark_earlier(head: list[Candidate], shown: int) -> tuple[list[Candidate], int, int]:
    """The head with each newer candidate no lower than an older one it contradicts, and each
    such older candidate among the first `shown` marked with the newer one's id (`later_id`).
    Returns (head, marked, moved)."""
    current = [c for c in head if c.memory is not None and c.history_of is None]
    later = later_of([stated(c) for c in current])
    if not later:
        return head, 0, 0
    by_id = {c.memory_id: c for c in head}
    before = {c.memory_id: index for index, c in enumerate(head)}
    moved = sum(1 for older, newer in later.items() if before[newer] > before[older])
    head = [by_id[memory_id] for memory_id in newer_above(list(before), later)]
    for older_id, newer_id in later.items():
        # The newer one's score is raised to the older one's, so scores still order results.
        by_id[newer_id].score = max(by_id[newer_id].score, by_id[older_id].score)
    marked = 0
    for position, candidate in enumerate(head[:shown], start=1):
        if (later_id := later.get(candidate.memory_id)) is not None:
            candidate.later_id = by_id[later_id].chain_id
            candidate.record("newer_first", position, candidate.score)
            marked += 1
    return head, marked, moved
