"""Load and visibility: candidates are re-read from Postgres by id *and user* under the
visibility rule (`visible_in_session`, one SQL definition in the memory repository, shared with
the history stage); the index is never the only guard. A document whose row is gone,
superseded, or a CONTEXT memory of another session has no row here and is dropped, whatever a
leg returned."""

from __future__ import annotations

import uuid

from app.db.models import Memory
from app.retrieval.candidates import Candidate


def load_visible(ranked: list[Candidate], rows: dict[uuid.UUID, Memory]) -> list[Candidate]:
    """The candidates that have a visible row, in order, with their rows attached."""
    return [
        candidate.load(memory)
        for candidate in ranked
        if (memory := rows.get(candidate.memory_id)) is not None
    ]
