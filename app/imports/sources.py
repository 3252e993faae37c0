"""Where import records come from: a streamed request body, or a file, read the same way
(JSON Lines, or a JSON list / {"results": [...]} document as mem0 exports it). Each yields
(line number, raw line)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterable, AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from app.errors import PayloadTooLargeError
from app.imports.documents import document_records, one_line_export

# Room for 8,000 characters of content, 16 KB of metadata and a 768-number vector, twice over.
MAX_LINE_BYTES = 256 * 1024
# A JSON document is read whole before its first record: the endpoint bounds it (the CLI,
# reading a local file, does not).
MAX_DOCUMENT_BYTES = 64 * 1024 * 1024
# Editors on Windows start UTF-8 files with one; it is not part of the first record.
BOM = b"\xef\xbb\xbf"
_LEADING_SPACE = re.compile(rb"(?:\xef\xbb\xbf)?[ \t\r\n]*")


@dataclass(frozen=True, slots=True)
class OversizedLine:
    """A line longer than the limit: dropped unread, reported as that line's error."""

    size: int
    limit: int


RawLine = bytes | OversizedLine


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


async def import_records(
    chunks: AsyncIterable[bytes],
    max_line_bytes: int = MAX_LINE_BYTES,
    max_document_bytes: int | None = None,
) -> AsyncIterator[tuple[int, RawLine]]:
    """The numbered records of an import, however they come (a request body, a file): JSON
    Lines, streamed; or one JSON document (a list, or an object with a "results" list, as
    mem0 exports them), read whole (at most `max_document_bytes`) and numbered by item. A
    leading UTF-8 byte-order mark is dropped. The shape is told by the first line."""
    stream = aiter(chunks)
    head = bytearray()
    async for chunk in stream:
        head += chunk
        if _first_line_end(head) >= 0 or len(head) > max_line_bytes:
            break
    if head.startswith(BOM):
        del head[: len(BOM)]
    if not _reads_as_document(bytes(head), max_line_bytes):
        async for record in ndjson_lines(_chained(bytes(head), stream), max_line_bytes):
            yield record
        return
    data = head
    _within(data, max_document_bytes)
    async for chunk in stream:
        data += chunk
        _within(data, max_document_bytes)
    records = document_records(bytes(data))
    if records is None:  # not one document after all: its lines, each bad one reported
        async for record in ndjson_lines(_chained(bytes(data)), max_line_bytes):
            yield record
        return
    for number, item in enumerate(records, start=1):
        yield number, item


async def file_lines(path: Path, chunk_bytes: int = 1 << 20) -> AsyncIterator[tuple[int, RawLine]]:
    """A local file's records, read as a request body is (see import_records)."""

    async def chunks() -> AsyncIterator[bytes]:
        with path.open("rb") as file:
            while chunk := file.read(chunk_bytes):
                yield chunk

    async for record in import_records(chunks()):
        yield record


def _within(document: bytearray, max_bytes: int | None) -> None:
    if max_bytes is not None and len(document) > max_bytes:
        raise PayloadTooLargeError(
            f"a JSON document is read whole, and this one is over {max_bytes} bytes: send "
            "JSON Lines (one record per line, streamed), or import the file with "
            "`python -m app import`"
        )


def _first_line_end(head: bytes | bytearray) -> int:
    """Where the first line with anything on it ends (-1: not within `head`)."""
    start = _LEADING_SPACE.match(head)
    assert start is not None  # the pattern matches the empty string
    return head.find(b"\n", start.end())


def _reads_as_document(head: bytes, max_line_bytes: int) -> bool:
    """A list, a `{"results": [...]}` on one line, or an object that goes on past its first
    line (or past the line limit); anything else is JSON Lines."""
    text = head.lstrip()
    if text.startswith(b"["):
        return True
    if not text.startswith(b"{"):
        return False
    end = text.find(b"\n")
    whole = one_line_export(text if end < 0 else text[:end])
    if whole is None:  # no whole object on the first line
        return end >= 0 or len(head) > max_line_bytes
    return whole


async def _chained(head: bytes, rest: AsyncIterator[bytes] | None = None) -> AsyncIterator[bytes]:
    if head:
        yield head
    if rest is not None:
        async for chunk in rest:
            yield chunk
