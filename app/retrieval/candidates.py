"""The plain data every retrieval stage takes and returns: candidates with per-stage scores."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from app.db.models import Memory


@dataclass(slots=True)
class StageScore:
    rank: int | None = None
    score: float | None = None


@dataclass(slots=True)
class Candidate:
    """One memory version moving through the pipeline; `score` is its current sort key."""

    memory_id: uuid.UUID
    score: float = 0.0
    stages: dict[str, StageScore] = field(default_factory=dict)
    memory: Memory | None = None
    # For history results: the current hit whose chain this earlier version belongs to.
    history_of: uuid.UUID | None = None
    # Plain fields the stages after loading use (set by `load`), so they need no ORM row.
    chain_id: uuid.UUID | None = None
    follows_chain_id: uuid.UUID | None = None
    speaker: str | None = None
    when: datetime | None = None  # event_time, else the time the memory was learned
    mentioned_at: datetime | None = None  # the time its content names, if any
    content: str = ""  # the memory's own words (what the specificity lever weighs)
    text: str = ""  # content, then context (what text-matching stages read)
    # The query's cosine to the memory on a fixed [0, 1] scale (app/retrieval/relevance.py).
    relevance: float | None = None
    # Lever newer_first: the chain id of a newer current memory that contradicts this one.
    later_id: uuid.UUID | None = None
    # Lever sentence_vector: ranked by content and context only, its sentences still pending.
    sentences_pending: bool = False

    def load(self, memory: Memory) -> Candidate:
        self.memory = memory
        self.chain_id = memory.chain_id
        self.follows_chain_id = memory.follows_chain_id
        self.speaker = memory.speaker
        self.when = memory.event_time or memory.created_at
        self.mentioned_at = memory.mentioned_at
        self.content = memory.content
        self.text = f"{memory.content}\n{memory.context}" if memory.context else memory.content
        return self

    def record(self, stage: str, rank: int | None, score: float | None) -> None:
        self.stages[stage] = StageScore(rank=rank, score=score)

    def explanation(self) -> dict[str, dict[str, Any]]:
        """Rank and score at each stage that saw the candidate, in the order they ran (a
        stage records once per candidate, so the dict's order is the pipeline's)."""
        return {name: {"rank": s.rank, "score": s.score} for name, s in self.stages.items()}


def rank_by_score(candidates: list[Candidate], stage: str) -> list[Candidate]:
    """Sort by score (stable for ties) and record each candidate's rank and score at `stage`."""
    ordered = sorted(candidates, key=lambda c: -c.score)
    for position, candidate in enumerate(ordered, start=1):
        candidate.record(stage, position, candidate.score)
    return ordered


def boost_scores(
    candidates: list[Candidate], factor: Callable[[Candidate], float], stage: str
) -> list[Candidate]:
    """Multiply each candidate's score by the factor it earns (1.0: none), then rank by score
    at `stage`: the one way the speaker, entity and time-mention levers boost."""
    for candidate in candidates:
        candidate.score *= factor(candidate)
    return rank_by_score(candidates, stage)
