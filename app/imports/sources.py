"""Where import lines come from: a streamed request body, or a file (JSON Lines, or a JSON
list / {"results": [...]} document as mem0 exports it). Each yields (line number, raw line)."""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import msgspec

from app.errors import InvalidInputError

# Room for 8,000 characters of content, 16 KB of metadata and a 768-number vector, twice over.
MAX_LINE_BYTES = 256 * 1024


@dataclass(frozen=True, slots=True)
class OversizedLine:
    """A line longer than the limit: dropped unread, reported as that line's error."""

    size: int
    limit: int


RawLine = bytes | OversizedLine | Any


async def ndjson_lines(
    chunks: AsyncIterable[bytes], max_line_bytes: int = MAX_LINE_BYTES
) -> AsyncIterator[tuple[int, RawLine]]:
    """Split a byte stream into numbered lines without holding more than one line in memory.
    Blank lines are numbered but not yielded."""
    buffer = bytearray()
    number = 0
    dropped = 0  # bytes of an oversized line skipped so far
    async for chunk in chunks:
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            if end < 0:
                piece = chunk[start:]
                if dropped or len(buffer) + len(piece) > max_line_bytes:
                    dropped += len(buffer) + len(piece)
                    buffer.clear()
                else:
                    buffer += piece
                break
            number += 1
            piece = chunk[start:end]
            if dropped or len(buffer) + len(piece) > max_line_bytes:
                yield number, OversizedLine(dropped + len(buffer) + len(piece), max_line_bytes)
            elif (line := bytes(buffer + piece)).strip():
                yield number, line
            buffer.clear()
            dropped = 0
            start = end + 1
    if dropped:
        yield number + 1, OversizedLine(dropped + len(buffer), max_line_bytes)
    elif buffer.strip():
        yield number + 1, bytes(buffer)


async def file_lines(path: Path) -> AsyncIterator[tuple[int, RawLine]]:
    """A local file's records. A JSON list (or an object holding one under "results") is read
    whole and numbered by item; anything else is read as JSON Lines, one line at a time."""
    with path.open("rb") as file:
        document = _json_document(file)
        if document is not None:
            for number, item in enumerate(document, start=1):
                yield number, item
            return
        for number, line in enumerate(file, start=1):
            if line.strip():
                yield number, line


def _json_document(file: BinaryIO) -> list[Any] | None:
    """The records of a file that is one JSON document rather than lines; None for JSON Lines.
    The file is left at its start."""
    head = file.read(4096).lstrip()
    file.seek(0)
    if not head.startswith((b"[", b"{")):
        return None
    if head.startswith(b"{"):
        first_line = file.readline()
        file.seek(0)
        try:
            first = msgspec.json.decode(first_line)
        except msgspec.DecodeError:
            first = None  # an object over several lines: one document
        # A complete record on the first line: JSON Lines.
        if isinstance(first, dict) and not isinstance(first.get("results"), list):
            return None
    try:
        document = msgspec.json.decode(file.read())
    except msgspec.DecodeError:
        return None  # not one document: read line by line, each bad line reported
    finally:
        file.seek(0)
    if isinstance(document, dict) and isinstance(document.get("results"), list):
        return list(document["results"])
    if isinstance(document, list):
        return document
    raise InvalidInputError(
        'expected JSON Lines, a JSON list, or an object with a "results" list', field="file"
    )
