"""Resolve English and Japanese time expressions to absolute time windows.

Shared by ingestion (step 2: "yesterday" in a message dated 2023-05-08 becomes 2023-05-07) and by
retrieval query analysis (stage 1: "what did I do last week?" becomes that ISO week).

Every window is ``[start, end)`` in whole days, in the reference's time zone (a naive reference is
taken as UTC). Each supported family is one regex in ``_PATTERNS`` with a small resolver that turns
the match into a ``(first_day, day_after_last, granularity)`` span.

Past bias: conversations mostly report what already happened, so an expression that names a point
of a cycle without saying which one ("Friday", "in May", "May 8th", "on the 8th", "in summer")
resolves to the most recent occurrence on or before the reference, unless its clause speaks of
the future ("we're expecting a child in May", "I'll call on Friday": app/time_expressions/
tense.py), when it is the next occurrence (the current one while it lasts). An explicit "next"
(or "this" for weekdays and seasons, "in N days" for offsets) points forward anyway.

Deliberate limits: the lowercase word "may" is read as a month only with a strong anchor (a year,
an ordinal, "of", or one of in/during/since/until/through/from before it), so "I may go", "this
may help" and "May I help you?" stay unmatched; a bare four-digit number ("room 2022") is not a
year without a preposition in front of it; "since May" is the month of May, not an open range.

Japanese (app/time_expressions/japanese.py): the same spans from 昨日, 先週の金曜日, 3日前,
二週間後, 5月3日, 令和5年5月, 去年の夏 ..., full-width digits and small kanji numerals included.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta, timezone

from app.time_expressions import japanese
from app.time_expressions.patterns import COMPILED, DASH, Span, forward
from app.time_expressions.tense import points_forward

# English and Japanese: the Japanese families are written in kanji and kana, so neither
# language's patterns can match the other's text.
_ALL_PATTERNS = [*COMPILED, *((re.compile(p), resolve) for p, resolve in japanese.PATTERNS)]


@dataclass(frozen=True, slots=True)
class TimeWindow:
    start: datetime  # inclusive, timezone-aware
    end: datetime  # exclusive, timezone-aware
    text: str  # the matched expression as it appears in the input
    granularity: str  # "day" | "week" | "weekend" | "month" | "year" | "range"

    @property
    def days(self) -> float:
        return (self.end - self.start).total_seconds() / 86400

    @property
    def center(self) -> datetime:
        return self.start + (self.end - self.start) / 2


_RANGE_OPEN = re.compile(r"\b(?:between|from)\s+$", re.IGNORECASE)
_RANGE_JOIN = re.compile(DASH, re.IGNORECASE)


def resolve_time_expressions(text: str, reference: datetime) -> list[TimeWindow]:
    """All time expressions in text, in order of appearance, non-overlapping (longest wins)."""
    tz = reference.tzinfo or UTC
    ref = reference.date()
    found: list[tuple[int, int, Span]] = []
    for pattern, resolve in _ALL_PATTERNS:
        for m in pattern.finditer(text):
            try:
                span = resolve(m, ref)
            except (OverflowError, ValueError):  # "last year" in year 1: no such window
                continue
            if span is not None and span[1] <= ref and points_forward(text, m.start()):
                span = forward(resolve, m, ref, span)
            if span is not None and _within_calendar(span):
                found.append((m.start(), m.end(), span))
    chosen: list[tuple[int, int, Span]] = []
    for start, end, span in sorted(found, key=lambda f: (f[0] - f[1], f[0])):
        if all(end <= other[0] or start >= other[1] for other in chosen):
            chosen.append((start, end, span))
    chosen.sort(key=lambda c: c[0])
    chosen = _join_ranges(text, chosen)

    def at(d: date) -> datetime:
        return datetime.combine(d, time(), tzinfo=tz)

    return [TimeWindow(at(s[0]), at(s[1]), text[a:b], s[2]) for a, b, s in chosen]


def _within_calendar(span: Span) -> bool:
    # Window ends are exclusive: the day after the last must exist too, with a day to spare for
    # a time zone ahead of UTC.
    return date.min < span[0] and span[1] < date.max


def _join_ranges(text: str, chosen: list[tuple[int, int, Span]]) -> list[tuple[int, int, Span]]:
    """Merge "between <A> and <B>" / "from <A> to <B>" into one range when both sides parsed."""
    merged: list[tuple[int, int, Span]] = []
    i = 0
    while i < len(chosen):
        start, end, span = chosen[i]
        if i + 1 < len(chosen):
            next_start, next_end, next_span = chosen[i + 1]
            opener = _RANGE_OPEN.search(text, 0, start)
            if opener and _RANGE_JOIN.fullmatch(text, end, next_start) and next_span[1] > span[0]:
                merged.append((opener.start(), next_end, (span[0], next_span[1], "range")))
                i += 2
                continue
        merged.append((start, end, span))
        i += 1
    return merged


def primary_window(text: str, reference: datetime) -> TimeWindow | None:
    """The first window, or None."""
    windows = resolve_time_expressions(text, reference)
    return windows[0] if windows else None


def as_aware(moment: datetime) -> datetime:
    """A naive timestamp is taken as UTC (as the resolver does with a naive reference)."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def utc_offset_minutes(moment: datetime) -> int:
    """The offset of an aware timestamp from UTC, in minutes (what a message row keeps)."""
    offset = as_aware(moment).utcoffset()
    return int(offset.total_seconds() // 60) if offset is not None else 0


def in_offset(moment: datetime, offset_minutes: int | None) -> datetime:
    """The same instant seen at a UTC offset (None: as it is)."""
    moment = as_aware(moment)
    if offset_minutes is None:
        return moment
    return moment.astimezone(timezone(timedelta(minutes=offset_minutes)))
