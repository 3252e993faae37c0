"""The store's field rules in one home: the bounds of a memory's and a message's fields as
msgspec types (shared by the API's wire schemas, which the OpenAPI document shows, and the
import's lines) and the checks that every writer runs, whatever the door (API, import, LLM).

Settings may lower a bound (`max_content_chars`, `max_top_k`, ...), never raise it past the
value here: the published contract stays true."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any

import msgspec

from app.config import Category, Scope
from app.errors import InvalidInputError
from app.time_expressions import as_aware

MAX_CONTENT_CHARS = 8_000
MAX_BATCH_ITEMS = 100
MAX_TOP_K = 100
MAX_METADATA_DEPTH = 32
# An idempotency key (the Idempotency-Key header, a message's idempotency_key): a UUID fits
# many times over; a longer one is a mistake (a whole body sent as the key).
MAX_IDEMPOTENCY_KEY_CHARS = 256
# Instants outside these years are typos (year 1, year 9999), not facts: they overflow date
# arithmetic (relative phrases, time windows) long before they mean anything.
EARLIEST_YEAR, LATEST_YEAR = 1000, 2999

Content = Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_CONTENT_CHARS)]
SessionId = Annotated[str, msgspec.Meta(min_length=1, max_length=256)]
Speaker = Annotated[str, msgspec.Meta(min_length=1, max_length=256)]
TopK = Annotated[int, msgspec.Meta(ge=1, le=MAX_TOP_K)]
Instant = Annotated[
    datetime,
    msgspec.Meta(
        description=f"RFC 3339 date-time, years {EARLIEST_YEAR}-{LATEST_YEAR}; "
        "without an offset it is taken as UTC."
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
    "MAX_BATCH_ITEMS",
    "MAX_CONTENT_CHARS",
    "MAX_TOP_K",
    "USER_ID_REGEX",
    "Category",
    "Content",
    "Instant",
    "Metadata",
    "Scope",
    "SessionId",
    "Speaker",
    "TopK",
    "check_instant",
    "check_json_shape",
    "check_text",
    "check_user_id",
]
