"""Line parsing and splitting, without a database."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from app.errors import InvalidInputError, PayloadTooLargeError
from app.imports.lines import ImportDraft, LineError, LineRules, parse_line
from app.imports.mem0 import our_category
from app.imports.sources import OversizedLine, import_records, ndjson_lines
from tests.imports.helpers import BOM, deeply_nested

RULES = LineRules(
    user_id="alice",
    line_users="must_match",
    line_format="auto",
    max_content_chars=8000,
    max_metadata_bytes=16_384,
)


async def _chunks(*parts: bytes):
    for part in parts:
        yield part


async def _collect(*parts: bytes, limit: int = 64) -> list[tuple[int, object]]:
    return [item async for item in ndjson_lines(_chunks(*parts), max_line_bytes=limit)]


async def test_lines_split_across_chunks_keep_their_numbers() -> None:
    lines = await _collect(b'{"a":', b"1}\n\n", b'{"b":2}\n{"c"', b":3}")
    assert lines == [(1, b'{"a":1}'), (3, b'{"b":2}'), (4, b'{"c":3}')]


async def test_an_oversized_line_is_reported_and_the_next_one_read() -> None:
    lines = await _collect(b"x" * 40, b"y" * 40 + b"\n", b'{"ok":1}\n', b"z" * 100)
    assert lines[0] == (1, OversizedLine(80, 64))
    assert lines[1] == (2, b'{"ok":1}')
    assert lines[2] == (3, OversizedLine(100, 64))


def test_errors_name_the_line_and_the_field() -> None:
    # (An unknown category is the table's to judge: tests/imports/test_import_api.py.)
    cases = {
        b"{not json": None,
        b'{"external_id": "a"}': "content",
        b'{"external_id": "a", "content": "x", "catgory": "travel"}': "catgory",
        b'{"external_id": "a", "content": "x", "embedding": [1, 2]}': "embedding",
        b'{"external_id": "a", "content": "x", "scope": "CONTEXT"}': "session_id",
        b'{"external_id": "a", "content": "x", "user_id": "mallory"}': "user_id",
        b'{"external_id": "a", "content": "x\\u0000y"}': "content",
        b'{"external_id": "", "content": "x"}': "external_id",
        b"[1, 2]": None,
    }
    for number, (raw, field) in enumerate(cases.items(), start=1):
        parsed = parse_line(number, raw, RULES)
        assert isinstance(parsed, LineError), raw
        assert (parsed.line, parsed.field) == (number, field), (raw, parsed)
        assert parsed.detail


def test_a_mem0_record_becomes_a_draft() -> None:
    record = {
        "id": "7f0c",
        "memory": "Loves hiking in the Alps",
        "user_id": "alice",
        "metadata": {"source": "chat"},
        "categories": ["misc", "sports"],
        "created_at": "2024-07-20T10:30:00-07:00",
        "updated_at": None,
        "hash": "abc",
    }
    parsed = parse_line(1, json.dumps(record).encode(), RULES)
    assert isinstance(parsed, ImportDraft)
    assert parsed.external_id == "7f0c"
    assert parsed.draft.content == "Loves hiking in the Alps"
    assert parsed.draft.category == "hobbies"
    assert parsed.draft.event_time is not None
    assert parsed.draft.event_time.isoformat() == "2024-07-20T10:30:00-07:00"
    assert our_category(["milestones", "misc"]) is None
    blank = parse_line(2, json.dumps({**record, "memory": "  "}).encode(), RULES)
    assert isinstance(blank, LineError) and blank.field == "memory"
    stranger = parse_line(3, json.dumps({**record, "user_id": "bob"}).encode(), RULES)
    assert isinstance(stranger, LineError) and stranger.field == "user_id"
    assert our_category(["Professional Details"]) == "professional"


def test_null_optional_fields_are_absent_ones() -> None:
    raw = b'{"external_id": "a", "content": " x ", "metadata": null, "category": null}'
    parsed = parse_line(1, raw, RULES)
    assert isinstance(parsed, ImportDraft)
    assert (parsed.draft.content, parsed.draft.metadata, parsed.draft.category) == ("x", {}, None)
    assert parsed.user_id == "alice" and parsed.vector is None


async def _records(body: bytes, piece: int = 7, **limits: int) -> list[tuple[int, object]]:
    pieces = [body[i : i + piece] for i in range(0, len(body), piece)]
    return [item async for item in import_records(_chunks(*pieces), **limits)]


async def test_a_byte_order_mark_is_not_part_of_the_first_line() -> None:
    assert await _records(BOM + b'{"a": 1}\n\n{"b": 2}\n') == [(1, b'{"a": 1}'), (3, b'{"b": 2}')]
    assert await _records(BOM + b'[{"a": 1}, {"b": 2}]') == [(1, b'{"a": 1}'), (2, b'{"b": 2}')]


async def test_a_json_document_is_split_into_its_records_undecoded() -> None:
    deep = deeply_nested().encode()
    items = [b'{"id": "1", "memory": "a, [b] {c} \\"d\\""}', b'{"id": "2", "m": ' + deep + b"}"]
    listed = b"[\n  " + b",\n  ".join(items) + b"\n]\n"
    assert await _records(listed) == [(1, items[0]), (2, items[1])]
    # {"results": [...]}: over several lines, or on one; other members are ignored.
    wrapped = b'{"relations": [{"x": 1}],\n "results": [' + b", ".join(items) + b"]}"
    assert await _records(wrapped) == [(1, items[0]), (2, items[1])]
    one_line = wrapped.replace(b"\n", b"") + b"\n"
    assert await _records(one_line) == [(1, items[0]), (2, items[1])]
    assert await _records(b"[]") == []
    # The deep record decodes to its own error.
    parsed = parse_line(2, items[1], RULES)
    assert isinstance(parsed, LineError) and "nested too deeply" in parsed.detail


async def test_what_is_not_one_document_is_read_as_json_lines() -> None:
    lines = b'{"a": [1,\n{"b": 2}\n'  # a broken first line: no document, two bad lines
    assert await _records(lines) == [(1, b'{"a": [1,'), (2, b'{"b": 2}')]
    assert await _records(b'{not json\n{"b": 2}\n') == [(1, b"{not json"), (2, b'{"b": 2}')]
    truncated = b'[{"a": 1},\n{"b": 2'
    assert await _records(truncated) == [(1, b'[{"a": 1},'), (2, b'{"b": 2')]
    with pytest.raises(InvalidInputError, match='"results" list'):
        await _records(b'{\n  "memories": []\n}')


async def test_a_document_over_its_bound_is_refused_before_any_record() -> None:
    body = b"[" + b", ".join([b'{"a": 1}'] * 20) + b"]"
    with pytest.raises(PayloadTooLargeError):
        await _records(body, max_document_bytes=100)
    assert len(await _records(body, max_document_bytes=len(body))) == 20


def test_expiry_in_our_lines_and_mem0s_expiration_date() -> None:
    ours = parse_line(
        1, json.dumps({"external_id": "e", "content": "Soon gone", "ttl_s": 60}).encode(), RULES
    )
    assert isinstance(ours, ImportDraft) and ours.draft.expires_at is not None
    assert ours.draft.expires_at - datetime.now(UTC) <= timedelta(seconds=60)
    record = {"id": "m1", "memory": "Trip to Oslo next week", "user_id": "alice"}
    dated = parse_line(2, json.dumps({**record, "expiration_date": "2099-03-04"}).encode(), RULES)
    assert isinstance(dated, ImportDraft)
    assert dated.draft.expires_at == datetime(2099, 3, 5, tzinfo=UTC)  # after that day
    stamped = {**record, "expiration_date": "2099-03-04T12:00:00Z"}
    timed = parse_line(3, json.dumps(stamped).encode(), RULES)
    assert isinstance(timed, ImportDraft)
    assert timed.draft.expires_at == datetime(2099, 3, 4, 12, tzinfo=UTC)
    for number, bad in ((4, "2001-01-01"), (5, "soon")):
        failed = parse_line(number, json.dumps({**record, "expiration_date": bad}).encode(), RULES)
        assert isinstance(failed, LineError), bad
        assert failed.field == "expiration_date", failed
    assert isinstance(parse_line(6, json.dumps(record).encode(), RULES), ImportDraft)
