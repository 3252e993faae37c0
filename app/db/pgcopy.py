"""PostgreSQL's binary COPY format, for the column types a bulk import writes.

asyncpg's own COPY encodes a real[] element by element (a 768-number vector: 0.4 ms a row,
most of an import's time); pgvector's binary form is the float32 bytes themselves, which
numpy hands over at once. Format: https://www.postgresql.org/docs/current/sql-copy.html
"""

from __future__ import annotations

import json
import struct
import uuid
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

_HEADER = b"PGCOPY\n\xff\r\n\x00" + struct.pack(">ii", 0, 0)
_TRAILER = struct.pack(">h", -1)
_NULL = struct.pack(">i", -1)
_POSTGRES_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)

Encoder = Callable[[Any], bytes]


def int4(value: int) -> bytes:
    return struct.pack(">i", value)


def text(value: str) -> bytes:
    return value.encode()


def uuid_(value: uuid.UUID) -> bytes:
    return value.bytes


def timestamptz(value: datetime) -> bytes:
    if value.tzinfo is None:
        raise ValueError("timestamptz needs an aware datetime")
    return struct.pack(">q", (value - _POSTGRES_EPOCH) // _MICROSECOND)


def jsonb(value: Any) -> bytes:
    return b"\x01" + json.dumps(value, separators=(",", ":"), allow_nan=False).encode()


def vector(value: np.ndarray) -> bytes:
    """pgvector's binary form: dimensions, an unused int16, then big-endian float32s."""
    return struct.pack(">hh", len(value), 0) + np.asarray(value, dtype=">f4").tobytes()


def copy_binary(rows: Iterable[tuple[Any, ...]], encoders: tuple[Encoder, ...]) -> bytes:
    """The whole COPY ... (FORMAT binary) stream for `rows`; None values are NULL."""
    field_count = struct.pack(">h", len(encoders))
    parts = [_HEADER]
    for row in rows:
        parts.append(field_count)
        for value, encode in zip(row, encoders, strict=True):
            if value is None:
                parts.append(_NULL)
            else:
                data = encode(value)
                parts.append(struct.pack(">i", len(data)))
                parts.append(data)
    parts.append(_TRAILER)
    return b"".join(parts)
