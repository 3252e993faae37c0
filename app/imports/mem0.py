"""mem0's export shape: {id, memory, user_id, metadata, categories, created_at, updated_at}.

Read as: external_id = id, content = memory, event_time = created_at, the user from user_id,
the agent and run from agent_id and run_id, and the category from the first of `categories`
that maps onto ours (else it is classified like any memory without one). Other fields of
mem0's records (hash, ...) are ignored.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import msgspec

from app.errors import InvalidInputError
from app.memories.fields import AgentId, RunId
from app.vocabulary import SEED_CATEGORIES

MAX_ID_CHARS = 256

# The keys that tell a mem0 record from one of our lines (which has content/external_id).
MEM0_KEYS = frozenset({"id", "memory"})

# Our field, as a mem0 record names it (for error messages).
MEM0_FIELD_NAMES = {"content": "memory", "external_id": "id", "event_time": "created_at"}

# mem0's default categories, onto ours; our own names map onto themselves. "milestones" and
# "misc" have no counterpart: such memories are classified.
MEM0_CATEGORIES: dict[str, str] = {
    **{name: name for name in SEED_CATEGORIES},
    "family": "relationships",
    "professional_details": "professional",
    "sports": "hobbies",
    "food": "dietary",
    "music": "hobbies",
    "technology": "technical_skills",
    "fashion": "preferences",
    "entertainment": "hobbies",
    "user_preferences": "preferences",
}


class Mem0Memory(msgspec.Struct):
    id: str
    memory: str
    user_id: str | None = None
    agent_id: AgentId | None = None
    run_id: RunId | None = None
    metadata: dict[str, Any] | None = None
    categories: list[str] | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None


def our_category(categories: list[str] | None) -> str | None:
    """The first of mem0's categories that maps onto ours."""
    for name in categories or []:
        key = name.strip().lower().replace(" ", "_").replace("-", "_")
        if key in MEM0_CATEGORIES:
            return MEM0_CATEGORIES[key]
    return None


def mem0_fields(record: Mem0Memory) -> dict[str, Any]:
    """The record as the fields of one of our lines."""
    if not 1 <= len(record.id) <= MAX_ID_CHARS:
        raise InvalidInputError(f"id must have 1 to {MAX_ID_CHARS} characters", field="id")
    return {
        "content": record.memory,
        "external_id": record.id,
        "speaker": None,
        "event_time": record.created_at,
        "session_id": None,
        "agent_id": record.agent_id or None,
        "run_id": record.run_id or None,
        "scope": "USER",
        "category": our_category(record.categories),
        "metadata": record.metadata or {},
        "embedding": None,
        "user_id": record.user_id,
    }
