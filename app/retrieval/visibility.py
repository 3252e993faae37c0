"""Load and visibility: candidates are re-read from Postgres by id *and user*; the index is
never the only guard. A document whose row is gone, superseded, or a CONTEXT memory of another
session is dropped here, whatever a leg returned."""

from __future__ import annotations

import uuid

from app.db.models import Memory
from app.retrieval.candidates import Candidate


def visible_to(memory: Memory, user_id: str, session_id: str | None) -> bool:
    if memory.user_id != user_id or not memory.is_current:
        return False
    return memory.scope != "CONTEXT" or memory.session_id == session_id


def load_visible(
    ranked: list[Candidate],
    rows: dict[uuid.UUID, Memory],
    user_id: str,
    session_id: str | None,
) -> list[Candidate]:
    """The candidates whose row exists and the caller may see, in order, with rows attached."""
    return [
        candidate.load(memory)
        for candidate in ranked
        if (memory := rows.get(candidate.memory_id)) is not None
        and visible_to(memory, user_id, session_id)
    ]
