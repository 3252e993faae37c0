"""The one date of a fact, as every surface states it: search (`event_at`), the context block,
the profile (`since`) and MCP.

Relative words are resolved once, when the memory is written, never again when it is read:
- a memory ingestion made from a message has its `event_time` resolved from its own words
  against the message's time in the sender's offset ("last month" said on 7 December 2026 is
  1 November 2026; "we're expecting in May" is next May): that is its date;
- a memory written directly takes its `event_time` as when it was said, so the time its
  content names (`mentioned_at`, resolved against that event time on write: "yesterday") is
  its date where it names one, else the event time.
A memory with neither is dated by the caller (when it was written, usually).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ColumnElement, case

from app.db.models import Memory


def event_date(memory: Memory) -> datetime | None:
    """When the fact happened (module docstring); None: no time is known for it."""
    if memory.source_message_id is None and memory.mentioned_at is not None:
        return memory.mentioned_at
    return memory.event_time


def event_date_sql() -> ColumnElement[datetime | None]:
    """`event_date` in SQL, to order by what is shown."""
    return case(
        (
            Memory.source_message_id.is_(None) & Memory.mentioned_at.is_not(None),
            Memory.mentioned_at,
        ),
        else_=Memory.event_time,
    )
