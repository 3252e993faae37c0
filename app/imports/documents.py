"""The records of one JSON document (a list, or an object with a "results" list, as mem0
exports them), split at the top level without decoding what they hold: each record is then
decoded on its own, so one nested deeper than a decoder can follow fails alone, as its line.
"""

from __future__ import annotations

import re

import msgspec

from app.errors import InvalidInputError

# Bytes that open, close or separate JSON values, and the quote that opens a string.
_STRUCTURE = re.compile(rb'["\[\]{},:]')
# The rest of a string after its opening quote, escapes included, up to the closing quote.
_STRING_REST = re.compile(rb'[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_SPACE = re.compile(rb"[ \t\r\n]*")
_CLOSES = {ord("["): ord("]"), ord("{"): ord("}")}


class NotADocument(ValueError):
    """The bytes are not one JSON document (they may still be JSON Lines)."""


class Incomplete(NotADocument):
    """The document ends before its closing bracket (so far: more may follow)."""


def _skip_space(data: bytes, position: int) -> int:
    match = _SPACE.match(data, position)
    assert match is not None  # the pattern matches the empty string
    return match.end()


def _children(data: bytes, start: int) -> tuple[list[tuple[int, int]], int]:
    """Spans of the values (of an object: the `"key": value` members) directly inside the
    list or object opening at `start`, and the index just past its end. Strings are skipped
    whole; nothing is decoded, and nothing recurses."""
    is_object = data[start] == ord("{")
    spans: list[tuple[int, int]] = []
    depth = 0
    child = position = start + 1
    if is_object:
        _expect_key(data, child)
    while True:
        match = _STRUCTURE.search(data, position)
        if match is None:
            raise Incomplete("the document ends before its closing bracket")
        char, position = data[match.start()], match.end()
        if char == ord('"'):
            rest = _STRING_REST.match(data, position)
            if rest is None:
                raise Incomplete("the document ends inside a string")
            position = rest.end()
        elif char in b"[{":
            depth += 1
        elif char in b"]}":
            if depth == 0:
                if char != _CLOSES[data[start]]:
                    raise NotADocument(f"a mismatched {chr(char)!r} at byte {match.start()}")
                _add_child(spans, data, child, match.start(), closing=True)
                return spans, position
            depth -= 1
        elif char == ord(",") and depth == 0:
            _add_child(spans, data, child, match.start(), closing=False)
            child = position
            if is_object:
                _expect_key(data, child)


def _expect_key(data: bytes, position: int) -> None:
    """An object's member starts with its key (or the object closes): else it is no JSON."""
    position = _skip_space(data, position)
    if position < len(data) and data[position] not in b'"}':
        raise NotADocument(f"expected a key at byte {position}")


def _add_child(
    spans: list[tuple[int, int]], data: bytes, start: int, end: int, closing: bool
) -> None:
    start = _skip_space(data, start)
    while end > start and data[end - 1] in b" \t\r\n":
        end -= 1
    if start < end:
        spans.append((start, end))
    elif not (closing and not spans):  # only an empty list or object has an empty child
        raise NotADocument(f"an empty item at byte {start}")


def _member(data: bytes, start: int, end: int) -> tuple[str, int]:
    """An object member's key, and where its value starts."""
    rest = _STRING_REST.match(data, start + 1)
    if data[start] != ord('"') or rest is None:
        raise NotADocument(f"expected a key at byte {start}")
    colon = _skip_space(data, rest.end())
    if colon >= end or data[colon] != ord(":"):
        raise NotADocument(f"expected ':' at byte {colon}")
    return msgspec.json.decode(data[start : rest.end()], type=str), _skip_space(data, colon + 1)


def one_line_export(line: bytes) -> bool | None:
    """How a first line that opens an object reads: True when it is a whole `{"results": [...]}`
    document, False when it is a whole object of another kind (a JSON Lines record), None
    when it is no whole object (a document over several lines, or a broken line)."""
    start = _skip_space(line, 0)
    try:
        members, end = _children(line, start)
        if line[end:].strip():
            return False  # more after it on the line: not a document
        return any(_results_at(line, a, b) is not None for a, b in members)
    except Incomplete:
        return None
    except NotADocument:
        return False  # not JSON: a bad line, reported as such


def _results_at(data: bytes, start: int, end: int) -> int | None:
    """Where the value of a "results" member holding a list starts, if this member is one."""
    key, value = _member(data, start, end)
    return value if key == "results" and data[value] == ord("[") else None


def document_records(data: bytes) -> list[bytes] | None:
    """The records of one JSON document: a list's items, or the items of an object's
    "results" list. None when `data` is not one JSON document (it is read as JSON Lines);
    InvalidInputError for a whole object without a "results" list."""
    start = _skip_space(data, 0)
    if start == len(data) or data[start] not in b"[{":
        return None
    try:
        children, end = _children(data, start)
        if data[end:].strip():
            return None
        if data[start] == ord("["):
            return [data[a:b] for a, b in children]
        for a, b in children:
            value = _results_at(data, a, b)
            if value is not None:
                items, _ = _children(data, value)
                return [data[i:j] for i, j in items]
    except NotADocument:
        return None
    raise InvalidInputError('expected JSON Lines, a JSON list, or an object with a "results" list')
