"""The expression families the resolver knows: one regex each, with a small resolver that
turns a match into a ``(first_day, day_after_last, granularity)`` span (see the package)."""

from __future__ import annotations

import calendar
import re
from collections.abc import Callable, Iterable
from datetime import date, timedelta

Span = tuple[date, date, str]  # first day, day after the last one, granularity
_Resolver = Callable[[re.Match[str], date], Span | None]


# --- vocabulary ------------------------------------------------------------------------------

_MONTH_NAMES = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
_MONTH_ABBREVIATIONS = {
    "jan": 1, "feb": 2, "mar": 3, "apr": 4, "jun": 6, "jul": 7, "aug": 8,
    "sep": 9, "sept": 9, "oct": 10, "nov": 11, "dec": 12,
}  # fmt: skip
_MONTHS = {**_MONTH_NAMES, **_MONTH_ABBREVIATIONS}
_WEEKDAYS = {name.lower(): i for i, name in enumerate(calendar.day_name)}
_NUMBER_WORDS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
    "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
    "a couple": 2, "a couple of": 2, "couple of": 2, "a few": 3, "few": 3, "several": 3,
}  # fmt: skip
_SEASON_START = {"spring": 3, "summer": 6, "autumn": 9, "fall": 9, "winter": 12}
# Prepositions strong enough to make a lowercase "may" a month ("in may", not "this may help").
_MAY_PREPOSITIONS = {"in", "during", "since", "until", "till", "through", "throughout", "from"}


def _alternation(words: Iterable[str]) -> str:
    return "|".join(sorted(words, key=len, reverse=True))


def _month(group: str) -> str:
    return rf"(?P<{group}>{_alternation(_MONTHS)})\b\.?"


_M = _month("month")
_M2 = _month("month2")
_DAY = r"(?P<{0}>\d{{1,2}})(?P<{0}_ord>st|nd|rd|th)?\b"
_D, _D1, _D2 = _DAY.format("day"), _DAY.format("day1"), _DAY.format("day2")
_Y = r"(?P<year>\d{4})\b"
_NUM = r"(?P<n>\d{1,3}|a\s+couple(?:\s+of)?|couple\s+of|a\s+few|few|several|an?|" + (
    "one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"
)
_UNIT = r"(?P<unit>day|week|month|year)s?\b"
DASH = r"\s*(?:-|\u2013|to|and|until|till|through)\s*"  # \u2013: en dash
_PREP = r"in|during|since|until|till|by|through|throughout|from|before|after"


def _words(text: str) -> str:
    return " ".join(text.lower().split())


def _number(m: re.Match[str]) -> int:
    raw = _words(m["n"])
    return int(raw) if raw.isdigit() else _NUMBER_WORDS[raw]


# --- calendar arithmetic -----------------------------------------------------------------------


def _shift_months(d: date, n: int) -> date:
    year, month0 = divmod(d.month - 1 + n, 12)
    year += d.year
    return date(year, month0 + 1, min(d.day, calendar.monthrange(year, month0 + 1)[1]))


def _day(d: date) -> Span:
    return d, d + timedelta(days=1), "day"


def _week(d: date) -> Span:
    monday = d - timedelta(days=d.weekday())
    return monday, monday + timedelta(days=7), "week"


def _month_span(year: int, month: int) -> Span:
    first = date(year, month, 1)
    return first, _shift_months(first, 1), "month"


def _year(year: int) -> Span:
    return date(year, 1, 1), date(year + 1, 1, 1), "year"


def _month_year(month: int, ref: date, bias: str) -> int:
    """Year of the named month: most recent on or before ``ref`` unless told otherwise."""
    if bias == "next":
        return ref.year if month > ref.month else ref.year + 1
    if bias == "last":
        return ref.year if month < ref.month else ref.year - 1
    if bias == "this":
        return ref.year
    return ref.year if month <= ref.month else ref.year - 1


def _date_without_year(month: int, day: int, ref: date, future: bool) -> date | None:
    step = 1 if future else -1
    for offset in range(8):  # 29 February may be up to 8 years away
        try:
            candidate = date(ref.year + step * offset, month, day)
        except ValueError:
            continue
        if (candidate > ref) if future else (candidate <= ref):
            return candidate
    return None


def _is_modal_may(m: re.Match[str], group: str = "month", anchored: bool = False) -> bool:
    token = m[group]
    return token.lower() == "may" and not token[0].isupper() and not anchored


def _explicit_day(m: re.Match[str], ref: date, day_group: str = "day") -> date | None:
    month, day = _MONTHS[m["month"].lower().rstrip(".")], int(m[day_group])
    if m["year"]:
        try:
            return date(int(m["year"]), month, day)
        except ValueError:
            return None
    return _date_without_year(month, day, ref, future=bool(m.groupdict().get("next")))


# --- resolvers (one per pattern) ---------------------------------------------------------------


def _relative_day(m: re.Match[str], ref: date) -> Span:
    words = _words(m[0])
    if "before yesterday" in words:
        return _day(ref - timedelta(days=2))
    if "after tomorrow" in words:
        return _day(ref + timedelta(days=2))
    if words.startswith(("yesterday", "last night")):
        return _day(ref - timedelta(days=1))
    if words.startswith("tomorrow"):
        return _day(ref + timedelta(days=1))
    return _day(ref)  # today, tonight, this morning/afternoon/evening


def _unit_span(unit: str, ref: date, steps: int) -> Span:
    """The day, week, month or year `steps` units away from the one holding `ref`."""
    if unit == "day":
        return _day(ref + timedelta(days=steps))
    if unit == "week":
        return _week(ref + timedelta(weeks=steps))
    if unit == "month":
        first = _shift_months(ref.replace(day=1), steps)
        return _month_span(first.year, first.month)
    return _year(ref.year + steps)


def _relative_unit(m: re.Match[str], ref: date) -> Span:
    step = {"last": -1, "previous": -1, "this": 0, "next": 1, "coming": 1}[_words(m["rel"])]
    return _unit_span(m["unit"].lower(), ref, step)


def _weekend(m: re.Match[str], ref: date) -> Span:
    return _weekend_span(_words(m["rel"]), ref)


def _weekend_span(rel: str, ref: date) -> Span:
    # Most recent Saturday on or before the reference ("over the weekend", "this weekend").
    saturday = ref - timedelta(days=(ref.weekday() - 5) % 7)
    if rel in {"last", "past", "this past", "previous"}:
        # The most recent weekend that is over: on a Saturday or Sunday, the one before.
        if saturday + timedelta(days=1) >= ref:
            saturday -= timedelta(days=7)
    elif rel in {"next", "coming"}:
        saturday += timedelta(days=7)
    return saturday, saturday + timedelta(days=2), "weekend"


def _weekday(m: re.Match[str], ref: date) -> Span:
    target = _WEEKDAYS[m["weekday"].lower()]
    rel = _words(m["rel"] or "")
    if rel in {"last", "past", "this past", "previous"}:
        back = (ref.weekday() - target) % 7 or 7
        return _day(ref - timedelta(days=back))
    if rel in {"next", "coming"}:
        return _day(ref + timedelta(days=(target - ref.weekday()) % 7 or 7))
    if rel == "this":
        return _day(ref + timedelta(days=target - ref.weekday()))
    return _day(ref - timedelta(days=(ref.weekday() - target) % 7))  # "on Friday", "Friday"


def _offset(m: re.Match[str], ref: date) -> Span:
    n = _number(m) * (1 if _words(m[0]).startswith("in ") else -1)
    return _unit_span(m["unit"].lower(), ref, n)


def _trailing_period(m: re.Match[str], ref: date) -> Span:
    return _trailing_span(_number(m) if m["n"] else 1, m["unit"].lower(), ref)


def _trailing_span(n: int, unit: str, ref: date) -> Span:
    """The last n days, weeks, months or years, through the reference day."""
    if unit in {"day", "week"}:
        start = ref - timedelta(days=n * (7 if unit == "week" else 1))
    else:
        start = _shift_months(ref, -n * (12 if unit == "year" else 1))
    return start, ref + timedelta(days=1), "range"


def _iso_date(m: re.Match[str], ref: date) -> Span | None:
    try:
        return _day(date(int(m["year"]), int(m["m"]), int(m["day"])))
    except ValueError:
        return None


def _us_date(m: re.Match[str], ref: date) -> Span | None:
    year = int(m["year"]) + (2000 if len(m["year"]) == 2 else 0)
    try:
        return _day(date(year, int(m["m"]), int(m["day"])))
    except ValueError:
        return None


def _day_month(m: re.Match[str], ref: date) -> Span | None:
    anchored = bool(m["year"] or m["day_ord"] or m.groupdict().get("of"))
    if _is_modal_may(m, anchored=anchored):
        return None
    day = _explicit_day(m, ref)
    return _day(day) if day else None


def _day_of_month(m: re.Match[str], ref: date) -> Span | None:
    day, first = int(m["day"]), ref.replace(day=1)
    for back in range(3):  # "on the 31st" may need to skip back over short months
        month = _shift_months(first, -back)
        if day <= calendar.monthrange(month.year, month.month)[1] and (back or day <= ref.day):
            return _day(month.replace(day=day))
    return None


def _month_with_year(m: re.Match[str], ref: date) -> Span:
    return _month_span(int(m["year"]), _MONTHS[m["month"].lower().rstrip(".")])


def _qualified_month(m: re.Match[str], ref: date) -> Span | None:
    qualifier, part = _words(m["q"]), (m["part"] or "").lower()
    if qualifier in {"early", "mid", "late"}:
        part = qualifier
    if _is_modal_may(m, anchored=bool(m["year"]) or qualifier in _MAY_PREPOSITIONS):
        return None
    month = _MONTHS[m["month"].lower().rstrip(".")]
    year = int(m["year"]) if m["year"] else _month_year(month, ref, qualifier)
    first, after, granularity = _month_span(year, month)
    if not part:
        return first, after, granularity
    start_day, end_day = {"early": (1, 11), "mid": (11, 21), "late": (21, None)}[part]
    end = first.replace(day=end_day) if end_day else after
    return first.replace(day=start_day), end, "range"


def _year_with_preposition(m: re.Match[str], ref: date) -> Span | None:
    year = int(m["year"])
    if not 1900 <= year <= 2100:
        return None
    part = _words(m["q"])
    thirds = {"early": (1, 5), "mid": (5, 9), "late": (9, 13)}
    if part not in thirds:
        return _year(year)
    first, after = thirds[part]
    return date(year, first, 1), _shift_months(date(year, after - 1, 1), 1), "range"


def _season(m: re.Match[str], ref: date) -> Span | None:
    qualifier = _words(m["q"] or "")
    if not qualifier and not m["year"]:
        return None  # a bare "fall" or "spring" is usually not a time expression
    start_month = _SEASON_START[m["season"].lower()]
    starts = [date(y, start_month, 1) for y in range(ref.year - 2, ref.year + 2)]
    if m["year"]:
        start = date(int(m["year"]), start_month, 1)
    elif qualifier == "last":
        start = max(s for s in starts if _shift_months(s, 3) <= ref)
    elif qualifier == "next":
        start = min(s for s in starts if s > ref)
    elif qualifier == "this":
        this_year = ref.year - 1 if start_month == 12 and ref.month < 3 else ref.year
        start = date(this_year, start_month, 1)
    else:
        start = max(s for s in starts if s <= ref)
    return start, _shift_months(start, 3), "range"


def _day_range(m: re.Match[str], ref: date) -> Span | None:
    if _is_modal_may(m, anchored=bool(m["year"])):
        return None
    first, last = _explicit_day(m, ref, "day1"), _explicit_day(m, ref, "day2")
    if first is None or last is None or last < first:
        return None
    return first, last + timedelta(days=1), "range"


def _month_range(m: re.Match[str], ref: date) -> Span | None:
    first_month = _MONTHS[m["month"].lower().rstrip(".")]
    last_month = _MONTHS[m["month2"].lower().rstrip(".")]
    if m["year"]:
        last_year = int(m["year"])
        first_year = int(m["year1"]) if m["year1"] else last_year - (first_month > last_month)
    else:
        first_year = _month_year(first_month, ref, "")
        last_year = first_year + (first_month > last_month)
    start, end = date(first_year, first_month, 1), _month_span(last_year, last_month)[1]
    return (start, end, "range") if start < end else None


def _year_range(m: re.Match[str], ref: date) -> Span | None:
    first, last = int(m["year1"]), int(m["year"])
    return (date(first, 1, 1), date(last + 1, 1, 1), "range") if first <= last else None


# --- pattern table -----------------------------------------------------------------------------

_WEEKDAY = rf"(?P<weekday>{_alternation(_WEEKDAYS)})\b"
_REL = r"this\s+past|last|past|previous|this|next|coming"

_PATTERNS: list[tuple[str, _Resolver]] = [
    (
        r"\b(?:the\s+day\s+before\s+yesterday|the\s+day\s+after\s+tomorrow|"
        r"(?:yesterday|tomorrow)(?:\s+(?:morning|afternoon|evening|night))?|"
        r"today|tonight|last\s+night|this\s+(?:morning|afternoon|evening))\b",
        _relative_day,
    ),
    (r"\b(?P<rel>last|previous|this|next|coming)\s+(?P<unit>week|month|year)\b", _relative_unit),
    (rf"\b(?P<rel>{_REL}|over\s+the|the)\s+weekend\b", _weekend),
    (rf"\b(?:(?P<rel>{_REL}|on)\s+)?{_WEEKDAY}", _weekday),
    (rf"\b{_NUM}\s+{_UNIT}\s+ago\b", _offset),
    (rf"\bin\s+{_NUM}\s+{_UNIT}", _offset),
    (rf"\b(?:the\s+)?(?:past|last|previous)\s+{_NUM}\s+{_UNIT}", _trailing_period),
    (r"\bthe\s+(?:past|previous)\s+(?P<n>)(?P<unit>day|week|month|year)\b", _trailing_period),
    (r"\b(?P<year>\d{4})-(?P<m>\d{1,2})-(?P<day>\d{1,2})\b", _iso_date),
    (r"\b(?P<m>\d{1,2})/(?P<day>\d{1,2})/(?P<year>\d{4}|\d{2})\b", _us_date),
    (
        rf"\b(?:(?P<next>next)\s+)?(?:the\s+)?{_D}\s+(?P<of>of\s+)?{_M}(?:,?\s+{_Y})?",
        _day_month,
    ),
    (rf"\b(?:(?P<next>next)\s+)?{_M}\s+(?:the\s+)?{_D}(?:,?\s+{_Y})?", _day_month),
    (r"\bon\s+the\s+(?P<day>\d{1,2})(?:st|nd|rd|th)\b", _day_of_month),
    (rf"\b(?:(?:{_PREP}|of)\s+)?{_M},?\s+{_Y}", _month_with_year),
    (
        rf"\b(?P<q>{_PREP}|last|next|this|early|mid|late)(?:\s+|-)"
        rf"(?:(?P<part>early|mid|late)(?:\s+|-))?{_M}(?:,?\s+{_Y})?",
        _qualified_month,
    ),
    (rf"\b(?P<q>{_PREP}|of|early|mid|late)(?:\s+|-){_Y}", _year_with_preposition),
    (
        r"\b(?:(?P<q>last|this|next|in|during|over|through|throughout)\s+(?:the\s+)?)?"
        rf"(?P<season>spring|summer|autumn|fall|winter)\b(?:\s+(?:of\s+)?{_Y})?",
        _season,
    ),
    (
        rf"\b(?:(?:between|from)\s+(?:the\s+)?)?{_D1}{DASH}(?:the\s+)?{_D2}\s+(?:of\s+)?{_M}"
        rf"(?:,?\s+{_Y})?",
        _day_range,
    ),
    (rf"\b(?:(?:between|from)\s+)?{_M}\s+{_D1}{DASH}{_D2}(?:,?\s+{_Y})?", _day_range),
    (
        rf"\b(?:between|from)\s+{_M}(?:\s+(?P<year1>\d{{4}}))?{DASH}{_M2}(?:,?\s+{_Y})?",
        _month_range,
    ),
    (rf"\b(?:between|from)\s+(?P<year1>\d{{4}}){DASH}{_Y}", _year_range),
]
COMPILED = [(re.compile(pattern, re.IGNORECASE), resolve) for pattern, resolve in _PATTERNS]


# --- forward reading (app/time_expressions/tense.py) --------------------------------------------

# Qualifiers that give a month or a season its own direction, or an open end: never turned.
_DIRECTED = {"last", "this", "next", "since"}


def _bare_point(m: re.Match[str]) -> bool:
    """A point of a cycle the text does not place: no year, no last/this/next."""
    groups = m.groupdict()
    if any(groups.get(name) for name in ("year", "year1", "next")):
        return False
    rel, qualifier = _words(groups.get("rel") or ""), _words(groups.get("q") or "")
    return rel in {"", "on"} and qualifier not in _DIRECTED


# Per resolver of a point of a cycle: how far to move the reference for the next occurrence.
_CYCLES: dict[_Resolver, Callable[[date], date]] = {
    _weekday: lambda ref: ref + timedelta(days=7),
    _day_of_month: lambda ref: _shift_months(ref, 1),
    **{
        resolve: lambda ref: _shift_months(ref, 12)
        for resolve in (_day_month, _qualified_month, _season, _day_range, _month_range)
    },
}


def forward(resolve: _Resolver, m: re.Match[str], ref: date, span: Span) -> Span:
    """The next occurrence of a bare point of a cycle that `span` (the past-biased reading)
    put wholly before the reference day; the span itself otherwise."""
    cycle = _CYCLES.get(resolve)
    if cycle is None or span[1] > ref or not _bare_point(m):
        return span
    return resolve(m, cycle(ref)) or span
