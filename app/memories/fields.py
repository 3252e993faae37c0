"""The store's field rules in one home: the bounds of a memory's and a message's fields as
msgspec types (shared by the API's wire schemas, which the OpenAPI document shows, and the
import's lines) and the checks that every writer runs, whatever the door (API, import, LLM).

The bounds themselves are domain vocabulary (app/vocabulary.py): settings may lower one
(`max_content_chars`, `max_top_k`, ...), never raise it past that value, so the published
contract stays true."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any

import msgspec

from app.errors import InvalidInputError
from app.time_expressions import as_aware
from app.vocabulary import (
    EARLIEST_YEAR,
    LATEST_YEAR,
    MAX_CONTENT_CHARS,
    MAX_METADATA_DEPTH,
    MAX_TOP_K,
    SEED_CATEGORIES,
    Scope,
)

# A string, not an enum: the list is the deployment's `categories` table, checked by
# app/memories/categories.py at every door; the seed 15 are the documented examples.
Category = Annotated[
    str,
    msgspec.Meta(
        description="One of this deployment's categories (the `categories` table): the 15 "
        f"seeded are {', '.join(SEED_CATEGORIES)}; a deployment may add its own. An unknown "
        "name is refused with a 400 that lists the known ones.",
        examples=list(SEED_CATEGORIES),
    ),
]
Content = Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_CONTENT_CHARS)]
SessionId = Annotated[str, msgspec.Meta(min_length=1, max_length=256)]
Speaker = Annotated[str, msgspec.Meta(min_length=1, max_length=256)]
MAX_SCOPE_ID_CHARS = 256
AgentId = Annotated[
    str,
    msgspec.Meta(
        min_length=1,
        max_length=MAX_SCOPE_ID_CHARS,
        description="The agent a memory belongs to. Null: shared by all of the user's agents. "
        "A search or list naming an agent sees its memories and the shared ones.",
    ),
]
RunId = Annotated[
    str,
    msgspec.Meta(
        min_length=1,
        max_length=MAX_SCOPE_ID_CHARS,
        description="The run (one task or episode) a memory came from. Null: of no run. A "
        "search or list naming a run sees its memories and those of no run.",
    ),
]
TopK = Annotated[int, msgspec.Meta(ge=1, le=MAX_TOP_K)]
Instant = Annotated[
    datetime,
    msgspec.Meta(
        description=f"RFC 3339 date-time, years {EARLIEST_YEAR}-{LATEST_YEAR}; "
        "without an offset it is taken as UTC."
    ),
]
TtlSeconds = Annotated[
    float,
    msgspec.Meta(
        gt=0,
        description="Time to live in seconds: the memory expires this long after it is "
        "written (stored as `expires_at`). Not together with `expires_at`.",
    ),
]
ExpiresAt = Annotated[
    datetime,
    msgspec.Meta(
        description="When the memory expires: from then on no read shows it, and the reaper "
        "removes it from both stores. RFC 3339, in the future; without an offset it is taken "
        "as UTC. Not together with `ttl_s`."
    ),
]
Metadata = Annotated[
    dict[str, Any],
    msgspec.Meta(
        description=f"Any JSON object, nested at most {MAX_METADATA_DEPTH} levels, "
        "without NUL (U+0000) characters."
    ),
]

# `$` also matches before a final newline in Python: always `fullmatch` this pattern.
USER_ID_REGEX = r"^[A-Za-z0-9][A-Za-z0-9_.:@\-]{0,127}$"
_USER_ID = re.compile(USER_ID_REGEX)


def check_user_id(user_id: str) -> str:
    if not _USER_ID.fullmatch(user_id):
        raise InvalidInputError(
            "user_id must be 1-128 characters: letters, digits and _ . : @ -, "
            "starting with a letter or digit",
            field="user_id",
        )
    return user_id


def check_text(value: str | None, field: str) -> str | None:
    """Postgres text and jsonb cannot hold a NUL character: refuse it, naming the field."""
    if value is not None and "\x00" in value:
        raise InvalidInputError(
            "contains a NUL character (U+0000), which cannot be stored; remove it", field=field
        )
    return value


def check_json_shape(value: Any, field: str) -> None:
    """At most MAX_METADATA_DEPTH levels of nesting and no NUL in any key or string. Walked
    with a stack, not recursion, so a hostile depth cannot exhaust the interpreter's."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth >= MAX_METADATA_DEPTH:
                raise InvalidInputError(
                    f"is nested more than {MAX_METADATA_DEPTH} levels deep", field=field
                )
            if isinstance(item, dict):
                for key in item:
                    check_text(key, field)
                children = list(item.values())
            else:
                children = item
            stack.extend((child, depth + 1) for child in children)
        elif isinstance(item, str):
            check_text(item, field)


def check_scope_id(value: str | None, field: str) -> str | None:
    """An agent or run id where the wire schema could not check it (a query parameter):
    1-256 characters, no NUL."""
    if value is not None and not 1 <= len(value) <= MAX_SCOPE_ID_CHARS:
        raise InvalidInputError(
            f"{field} must have 1 to {MAX_SCOPE_ID_CHARS} characters, not {len(value)}",
            field=field,
        )
    return check_text(value, field)


def check_instant(moment: datetime | None, field: str) -> datetime | None:
    """A timezone-aware instant (naive is taken as UTC) within the plausible years."""
    if moment is None:
        return None
    if not EARLIEST_YEAR <= moment.year <= LATEST_YEAR:
        raise InvalidInputError(
            f"year {moment.year} is out of range: give a date between the years "
            f"{EARLIEST_YEAR} and {LATEST_YEAR}",
            field=field,
        )
    return as_aware(moment)


__all__ = [
    "USER_ID_REGEX",
    "AgentId",
    "Category",
    "Content",
    "ExpiresAt",
    "Instant",
    "Metadata",
    "RunId",
    "Scope",
    "SessionId",
    "Speaker",
    "TopK",
    "TtlSeconds",
    "check_instant",
    "check_json_shape",
    "check_scope_id",
    "check_text",
    "check_user_id",
]
