"""The store's field rules in one home: the bounds of a memory's and a message's fields as
msgspec types (shared by the API's wire schemas, which the OpenAPI document shows, and the
import's lines) and the checks that every writer runs, whatever the door (API, import, LLM).

The bounds themselves are domain vocabulary (app/vocabulary.py): settings may lower one
(`max_content_chars`, `max_top_k`, ...), never raise it past that value, so the published
contract stays true."""

from __future__ import annotations

import json
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
Language = Annotated[
    str,
    msgspec.Meta(
        pattern="^[a-z]{2}$",
        description="The language of the content, ISO 639-1 (`en`, `ja`, ...). Omitted or null: "
        "detected from the content (null where it has no letters). Japanese, Chinese and Korean "
        "text is searched by BM25 with analysis of its own (docs/languages.md).",
        examples=["en", "ja"],
    ),
]
Metadata = Annotated[
    dict[str, Any],
    msgspec.Meta(
        description=f"Any JSON object, nested at most {MAX_METADATA_DEPTH} levels, "
        "without NUL (U+0000) or unpaired surrogate (U+D800-U+DFFF) characters."
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


# What Postgres text and jsonb cannot hold: NUL, and the UTF-16 surrogates, which have no UTF-8
# form (Python lets a lone one into a str: `json.loads('"\\ud800"')`).
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def check_text(value: str | None, field: str) -> str | None:
    """The one rule for every text the store keeps or compares: refuse what Postgres cannot
    store, naming the field and the character."""
    found = _UNSTORABLE.search(value) if value is not None else None
    if found is not None:
        char = found.group()
        what = "a NUL character" if char == "\x00" else "an unpaired UTF-16 surrogate"
        raise InvalidInputError(
            f"contains {what} (U+{ord(char):04X}) at position {found.start()}, which cannot be "
            "stored; remove it",
            field=field,
        )
    return value


def check_all_text(value: Any, field: str, max_depth: int | None = None) -> None:
    """`check_text` on every string in `value`, dict keys too: a decoded request body (its
    Structs' fields are named in the path, `memories[1].category`; a free JSON object such
    as metadata is named as a whole) or a JSON value. With `max_depth`, dicts and lists may
    nest at most that deep. Walked with a stack, not recursion, so a hostile depth cannot
    exhaust the interpreter's."""
    # (item, its field, its depth in dicts and lists, inside a free JSON object)
    stack: list[tuple[Any, str, int, bool]] = [(value, field, 0, False)]
    while stack:
        item, at, depth, free = stack.pop()
        if isinstance(item, str):
            check_text(item, at)
        elif isinstance(item, msgspec.Struct):
            fields = [
                (getattr(item, name), f"{at}.{name}" if at else name, depth, False)
                for name in item.__struct_fields__
            ]
            stack.extend(reversed(fields))  # reversed: the first offender is the one named
        elif isinstance(item, dict | list | tuple):
            if max_depth is not None and depth >= max_depth:
                raise InvalidInputError(f"is nested more than {max_depth} levels deep", field=at)
            if isinstance(item, dict):
                for key in item:
                    check_text(key, at)
                stack.extend((child, at, depth + 1, True) for child in reversed(item.values()))
            else:
                items = [
                    (child, at if free else f"{at}[{i}]", depth + 1, free)
                    for i, child in enumerate(item)
                ]
                stack.extend(reversed(items))


def unstorable_in_json(raw: bytes, target: Any) -> InvalidInputError | None:
    """Why msgspec refused a JSON document of type `target`, when the reason is text that
    cannot be stored: it refuses a lone surrogate escape (`"\\ud800"`) but says only that the
    input is truncated or malformed. Python's json reads one, so the error names the field and
    the character as for a NUL. None when that is not why (read only after a refusal)."""
    try:
        check_all_text(msgspec.convert(json.loads(raw), type=target, strict=True), "")
    except InvalidInputError as unstorable:
        return unstorable
    except (ValueError, RecursionError, msgspec.ValidationError):  # not JSON even so
        return None
    return None


def check_json_shape(value: Any, field: str) -> None:
    """At most MAX_METADATA_DEPTH levels of nesting and nothing unstorable in any key or
    string."""
    check_all_text(value, field, MAX_METADATA_DEPTH)


def check_scope_id(value: str | None, field: str) -> str | None:
    """An agent or run id where the wire schema could not check it (a query parameter):
    1-256 characters, storable (`check_text`)."""
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
    "check_all_text",
    "check_instant",
    "check_json_shape",
    "check_scope_id",
    "check_text",
    "check_user_id",
    "unstorable_in_json",
]
