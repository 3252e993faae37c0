"""Session scoring: evidence comes in sessions (conversations, episodes), so a session is
scored by the memories of it that the search found, and its memories share that score.

A memory's session is its own `session_id`, else the day of its `event_time` (a store without
sessions still has days); a memory with neither is in no session and left as it is. Over the
head of the ranking (COGNIS_SESSION_TOP_N):

    session score  S(s) = sum of the scores of its best three candidates
    lift           score *= 1 + COGNIS_SESSION_BOOST * S(s) / max S
    spread         the n-th candidate of one session (n >= 2) *= COGNIS_SESSION_DECAY ** (n - 1)

The lift raises the memories of strongly matching sessions over strays; the spread keeps one
session from taking all of the top k, so a question about something discussed in several
sessions surfaces each of them. Only questions that ask for several things (a list, or
parts: app/retrieval/query_parts.py) are re-scored.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from app.retrieval.candidates import Candidate, rank_by_score
from app.retrieval.plan import Lever, Tuning
from app.retrieval.steps import SearchContext, Step

SESSIONS = Lever(
    "sessions",
    "For list and multi-part questions: sessions (a memory's session_id, else its "
    "event_time's day) are scored by their best candidates; their memories are lifted by it "
    "(COGNIS_SESSION_BOOST) and one session's further memories decay (COGNIS_SESSION_DECAY), "
    "so the top k spans the matching sessions.",
)
BEST_OF_SESSION = 3


@dataclass(frozen=True, slots=True)
class SessionLift:
    top_n: int  # the candidates whose scores make their sessions'
    boost: float
    decay: float


LIFT = Tuning(
    "sessions",
    lambda basis: SessionLift(
        basis.settings.session_top_n, basis.settings.session_boost, basis.settings.session_decay
    ),
)


def session_of(candidate: Candidate) -> str | None:
    memory = candidate.memory
    if memory is None:
        return None
    if memory.session_id:
        return f"session:{memory.session_id}"
    if memory.event_time is not None:
        return f"day:{memory.event_time.date().isoformat()}"
    return None


def score_sessions(ranked: list[Candidate], top_n: int) -> dict[str, float]:
    """Each session's score over the head of the ranking: its best candidates' scores summed."""
    scores: dict[str, list[float]] = defaultdict(list)
    for candidate in ranked[:top_n]:
        if (session := session_of(candidate)) is not None:
            scores[session].append(candidate.score)
    return {s: sum(sorted(v, reverse=True)[:BEST_OF_SESSION]) for s, v in scores.items()}


def lift_sessions(
    ranked: list[Candidate], top_n: int, boost: float, decay: float
) -> tuple[list[Candidate], int]:
    """Re-score by session (lift, then spread) and re-rank; returns the list and how many
    sessions the head held."""
    sessions = score_sessions(ranked, top_n)
    best = max(sessions.values(), default=0.0)
    if best <= 0:
        return rank_by_score(ranked, "sessions"), len(sessions)
    for candidate in ranked:
        if (session := session_of(candidate)) in sessions:
            candidate.score *= 1 + boost * sessions[session] / best
    seen: dict[str, int] = defaultdict(int)
    for candidate in sorted(ranked, key=lambda c: -c.score):
        if (session := session_of(candidate)) is not None:
            candidate.score *= decay ** seen[session]
            seen[session] += 1
    return rank_by_score(ranked, "sessions"), len(sessions)


def not_asking_for_several(_: list[Candidate], context: SearchContext) -> str | None:
    """Sessions matter where the answer is several things: a list question ("which books")
    or one with parts; a question after one fact keeps its ranking (measured: spreading every
    question's top k cost single-hop recall on LoCoMo)."""
    parts = context.analysis.parts
    return None if parts.asks_list or len(parts.parts) > 1 else "not a list or multi-part question"


async def sessions(ranked: list[Candidate], context: SearchContext) -> tuple[list[Candidate], str]:
    lift = context.plan.numbers(LIFT)
    ranked, held = lift_sessions(ranked, lift.top_n, lift.boost, lift.decay)
    return ranked, f"{held} sessions scored"


STEP = Step(
    "sessions",
    sessions,
    timer="sessions_ms",
    lever=SESSIONS,
    skip=not_asking_for_several,
    explains="sessions",
)
