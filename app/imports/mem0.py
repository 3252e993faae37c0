"""mem0's export shape: {id, memory, user_id, metadata, categories, created_at, updated_at,
expiration_date}.

Read as: external_id = id, content = memory, event_time = created_at, the user from user_id,
the agent and run from agent_id and run_id, the category from the first of `categories` that
maps onto ours (else it is classified like any memory without one), and expires_at from
expiration_date (mem0 drops a memory after that date: it expires at the start of the next day,
UTC; a full timestamp is taken as it is). Other fields of mem0's records (hash, ...) are ignored.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from typing import Any

import msgspec

from app.errors import InvalidInputError
from app.memories.fields import AgentId, RunId
from app.vocabulary import SEED_CATEGORIES

MAX_ID_CHARS = 256

# The keys that tell a mem0 record from one of our lines (which has content/external_id).
MEM0_KEYS = frozenset({"id", "memory"})

# Our field, as a mem0 record names it (for error messages).
MEM0_FIELD_NAMES = {
    "content": "memory",
    "external_id": "id",
    "event_time": "created_at",
    "expires_at": "expiration_date",
}

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
    expiration_date: str | None = None


def expiry_of(expiration_date: str | None) -> datetime | None:
    """mem0's expiration_date as our expires_at: a date (YYYY-MM-DD) ends with its day, so the
    memory expires at the next midnight UTC; a timestamp is that instant."""
    if expiration_date is None:
        return None
    try:
        if len(expiration_date) == 10:
            day = date.fromisoformat(expiration_date)
            return datetime.combine(day + timedelta(days=1), time(), tzinfo=UTC)
        return datetime.fromisoformat(expiration_date.replace("Z", "+00:00"))
    except ValueError as exc:
        raise InvalidInputError(
            f"expiration_date {expiration_date[:40]!r} is neither a date (YYYY-MM-DD) nor an "
            "RFC 3339 time",
            field="expires_at",
        ) from exc


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
        "expires_at": expiry_of(record.expiration_date),
    }
