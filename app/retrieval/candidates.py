"""The plain data every retrieval stage takes and returns: candidates with per-stage scores."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from app.db.models import Memory

# Stage names, in pipeline order, as they appear in explanations.
STAGES = (
    "256d",
    "768d",
    "feedback",
    "bm25",
    "rrf",
    "speaker",
    "entities",
    "neighbours",
    "time_mention",
    "temporal",
    "rerank",
    "final",
)


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
    text: str = ""  # content, then context (what text-matching stages read)

    def load(self, memory: Memory) -> Candidate:
        self.memory = memory
        self.chain_id = memory.chain_id
        self.follows_chain_id = memory.follows_chain_id
        self.speaker = memory.speaker
        self.when = memory.event_time or memory.created_at
        self.mentioned_at = memory.mentioned_at
        self.text = f"{memory.content}\n{memory.context}" if memory.context else memory.content
        return self

    def record(self, stage: str, rank: int | None, score: float | None) -> None:
        self.stages[stage] = StageScore(rank=rank, score=score)

    def explanation(self) -> dict[str, dict[str, Any]]:
        return {
            name: {"rank": s.rank, "score": s.score}
            for name in STAGES
            if (s := self.stages.get(name)) is not None
        }


def rank_by_score(candidates: list[Candidate], stage: str) -> list[Candidate]:
    """Sort by score (stable for ties) and record each candidate's rank and score at `stage`."""
    ordered = sorted(candidates, key=lambda c: -c.score)
    for position, candidate in enumerate(ordered, start=1):
        candidate.record(stage, position, candidate.score)
    return ordered
