"""Page cursors of the paged lists (memories, users): opaque to clients, checked when they come
back. A cursor is the page's last key, its parts joined by `|` and base64url-encoded without
padding; one that is not exactly such a string, with the parts its list expects, is a 400, never
a silently different page."""

from __future__ import annotations

import base64
import binascii
import uuid
from datetime import datetime
from typing import TYPE_CHECKING

from app.errors import InvalidInputError

if TYPE_CHECKING:
    from app.db.models import Memory

_SEPARATOR = "|"


def encode_cursor(*parts: str) -> str:
    """The cursor of a key; no part may hold the separator."""
    raw = _SEPARATOR.join(parts)
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_cursor(cursor: str, parts: int) -> list[str]:
    """The `parts` parts of a cursor `encode_cursor` made, or an InvalidInputError."""
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        # validate=True: a character outside the alphabet is an error, not skipped.
        raw = base64.b64decode(padded, altchars=b"-_", validate=True).decode()
    except (binascii.Error, ValueError):  # UnicodeDecodeError is a ValueError
        raise invalid_cursor() from None
    found = raw.split(_SEPARATOR)
    if len(found) != parts:
        raise invalid_cursor()
    return found


def invalid_cursor() -> InvalidInputError:
    return InvalidInputError(
        "cursor is not valid: pass the next_cursor of a previous page unchanged", field="cursor"
    )


# The memories' list pages by (created_at, id).
def encode_memory_cursor(memory: Memory) -> str:
    return encode_cursor(memory.created_at.isoformat(), str(memory.id))


def decode_memory_cursor(cursor: str) -> tuple[datetime, uuid.UUID]:
    created_at, memory_id = decode_cursor(cursor, 2)
    try:
        after = datetime.fromisoformat(created_at), uuid.UUID(memory_id)
    except ValueError:
        raise invalid_cursor() from None
    if after[0].tzinfo is None:  # every cursor given out carries created_at's offset
        raise invalid_cursor()
    return after
