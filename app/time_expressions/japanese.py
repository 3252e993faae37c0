"""Japanese time expressions: the same spans as the English families, read from Japanese.

The conventions are the English resolver's (see the package): a bare weekday or month is the
most recent one on or before the reference, a bare 週末 the most recent weekend; offsets move
by whole units (3日前, 二週間後, 半年前). Where Japanese is more exact than English the
Japanese meaning wins: 先週の金曜日 is the Friday of last week's (Monday-first) calendar week,
来週の金曜日 the Friday of next week's, while 次の金曜日 and この前の金曜日 are English's
"next Friday" and "last Friday".

Numbers: Python's ``\\d`` and ``int`` read full-width digits (５月３日) as they read ASCII
ones, and small kanji numerals (三日前, 十二月, 二〇二三年) go through ``kanji_number``. Years:
four digits with 年, or an era (令和, 平成, 昭和; 元年 is the first). Japanese has no spaces, so
no pattern relies on ``\\b``: a number may not follow another digit, and 年 may not be 年度's
or 年生's (a school year).
"""

from __future__ import annotations

import re
from datetime import date, timedelta

from app.time_expressions.patterns import (
    Span,
    _day,
    _month_span,
    _month_year,
    _Resolver,
    _shift_months,
    _trailing_span,
    _unit_span,
    _week,
    _weekend_span,
    _year,
)

_KANJI_DIGITS = {c: i for i, c in enumerate("〇一二三四五六七八九")} | {"零": 0}
_KANJI_UNITS = {"十": 10, "百": 100}
_KANJI = "〇零一二三四五六七八九十百"


def kanji_number(text: str) -> int:
    """12 (ASCII or full-width digits), 十二, 二十三, 百五, 二〇二三 -> int; 数 ("several") is 3."""
    if text == "数":
        return 3
    if text.isdigit():
        return int(text)
    total = current = 0
    for ch in text:
        if ch in _KANJI_DIGITS:
            current = current * 10 + _KANJI_DIGITS[ch]
        elif ch in _KANJI_UNITS:
            total += (current or 1) * _KANJI_UNITS[ch]
            current = 0
        else:
            raise ValueError(f"not a number: {text!r}")
    return total + current


_N = rf"(?<![\d{_KANJI}])(?P<n>\d{{1,3}}|[{_KANJI}]{{1,4}}|数)"
_MONTH = rf"(?<![\d{_KANJI}])(?P<month>\d{{1,2}}|[{_KANJI}]{{1,3}})月"
_DAY = rf"(?P<day>\d{{1,2}}|[{_KANJI}]{{1,3}})日"
_ERAS = {"令和": 2018, "平成": 1988, "昭和": 1925}
_YEAR = (
    rf"(?:(?<!\d)(?P<year>\d{{4}}|[{_KANJI}]{{4}})|(?P<era>令和|平成|昭和)"
    rf"(?P<era_year>\d{{1,2}}|[{_KANJI}]{{1,3}}|元))年(?!度|生|代)"
)
_REL_YEAR = r"(?P<rel_year>一昨年|おととし|去年|昨年|今年|本年|来年|再来年)"
_REL_YEAR_STEPS = {
    "一昨年": -2, "おととし": -2, "去年": -1, "昨年": -1, "今年": 0, "本年": 0,
    "来年": 1, "再来年": 2,
}  # fmt: skip
_WEEKDAYS = {c: i for i, c in enumerate("月火水木金土日")}
_WEEK_REL = {"先々週": -2, "先週": -1, "前週": -1, "今週": 0, "来週": 1, "再来週": 2}
_SEASON_START = {"春": 3, "夏": 6, "秋": 9, "冬": 12}
_PARTS = {
    "上旬": (1, 11), "初旬": (1, 11), "初め": (1, 11), "はじめ": (1, 11), "頭": (1, 11),
    "中旬": (11, 21), "半ば": (11, 21), "下旬": (21, None), "末": (21, None),
}  # fmt: skip


def _year_of(m: re.Match[str], ref: date) -> int | None:
    """The year the match names: 2023年, 令和5年, 元年, 去年 ...; None when it names none."""
    groups = m.groupdict()
    if groups.get("year"):
        return kanji_number(m["year"])
    if groups.get("era"):
        raw = m["era_year"]
        return _ERAS[m["era"]] + (1 if raw == "元" else kanji_number(raw))
    if groups.get("rel_year"):
        return ref.year + _REL_YEAR_STEPS[m["rel_year"]]
    return None


# --- resolvers ---------------------------------------------------------------------------------

_DAY_STEPS = {
    "一昨日": -2, "おととい": -2, "おとつい": -2,
    "昨日": -1, "きのう": -1, "昨夜": -1, "昨晩": -1, "ゆうべ": -1,
    "今日": 0, "本日": 0, "今朝": 0, "今夜": 0, "今晩": 0,
    "明日": 1, "あした": 1, "明朝": 1, "明後日": 2, "あさって": 2, "明々後日": 3, "しあさって": 3,
}  # fmt: skip
_UNIT_STEPS = {
    **{word: ("week", step) for word, step in _WEEK_REL.items()},
    "先々月": ("month", -2), "先月": ("month", -1), "前月": ("month", -1),
    "今月": ("month", 0), "来月": ("month", 1), "再来月": ("month", 2),
    **{word: ("year", step) for word, step in _REL_YEAR_STEPS.items()},
}  # fmt: skip


def _relative_day(m: re.Match[str], ref: date) -> Span:
    return _day(ref + timedelta(days=_DAY_STEPS[m[0]]))


def _relative_unit(m: re.Match[str], ref: date) -> Span:
    unit, step = _UNIT_STEPS[m[0]]
    return _unit_span(unit, ref, step)


def _weekend(m: re.Match[str], ref: date) -> Span:
    rel = m["rel"].strip()
    if rel in {"今", "この"}:  # this calendar week's, even on a Monday
        saturday = _week(ref)[0] + timedelta(days=5)
        return saturday, saturday + timedelta(days=2), "weekend"
    return _weekend_span({"先": "last", "来": "next"}.get(rel, ""), ref)


def _weekday(m: re.Match[str], ref: date) -> Span:
    target, rel = _WEEKDAYS[m["weekday"]], m["rel"] or ""
    if rel in _WEEK_REL:  # the weekday of that calendar week
        monday = _week(ref)[0] + timedelta(weeks=_WEEK_REL[rel])
        return _day(monday + timedelta(days=target))
    if rel in {"次の", "今度の", "次回の"}:
        return _day(ref + timedelta(days=(target - ref.weekday()) % 7 or 7))
    if rel in {"この前の", "前の", "この間の", "こないだの", "この間"}:
        return _day(ref - timedelta(days=(ref.weekday() - target) % 7 or 7))
    return _day(ref - timedelta(days=(ref.weekday() - target) % 7))


_UNITS = {"日": "day", "週": "week", "月": "month", "年": "year"}


def _offset(m: re.Match[str], ref: date) -> Span:
    if m["n"] == "半":  # 半年 = six months
        n, unit = 6, "month"
    else:  # ヶ月, か月, 箇月 ... end in 月
        n, unit = kanji_number(m["n"]), _UNITS[m["unit"][-1]]
    return _unit_span(unit, ref, n if m["dir"] == "後" else -n)


def _trailing_period(m: re.Match[str], ref: date) -> Span:
    return _trailing_span(kanji_number(m["n"]), _UNITS[m["unit"][-1]], ref)


def _date(m: re.Match[str], ref: date) -> Span | None:
    month, day = kanji_number(m["month"]), kanji_number(m["day"])
    year = _year_of(m, ref)
    if year is not None:
        return _day(date(year, month, day))  # ValueError (31 February): skipped by the caller
    for back in range(8):  # most recent on or before the reference; 29 February may be far
        try:
            candidate = date(ref.year - back, month, day)
        except ValueError:
            continue
        if candidate <= ref:
            return _day(candidate)
    return None


def _slash_date(m: re.Match[str], ref: date) -> Span:
    return _day(date(int(m["year"]), int(m["m"]), int(m["day"])))


def _month(m: re.Match[str], ref: date) -> Span | None:
    month = kanji_number(m["month"])
    if not 1 <= month <= 12:
        return None
    year = _year_of(m, ref)
    first, after, granularity = _month_span(
        year if year is not None else _month_year(month, ref, ""), month
    )
    if not m["part"]:
        return first, after, granularity
    start_day, end_day = _PARTS[m["part"]]
    end = first.replace(day=end_day) if end_day else after
    return first.replace(day=start_day), end, "range"


def _year_only(m: re.Match[str], ref: date) -> Span | None:
    year = _year_of(m, ref)
    return _year(year) if year is not None and 1900 <= year <= 2100 else None


def _season(m: re.Match[str], ref: date) -> Span:
    start_month = _SEASON_START[m["season"]]
    year = _year_of(m, ref)
    if year is None:  # この夏, 今夏, 昨夏, 来夏
        year = ref.year + {"昨": -1, "来": 1}.get(m["near"], 0)
        if m["near"] in {"この", "今"} and start_month == 12 and ref.month < 3:
            year -= 1  # this winter, in January, began last December
    start = date(year, start_month, 1)
    return start, _shift_months(start, 3), "range"


# --- pattern table -----------------------------------------------------------------------------

_WD = r"(?P<weekday>[月火水木金土日])曜(?:日)?"
_WEEK_WORDS = "|".join(sorted(_WEEK_REL, key=len, reverse=True))
_ANY_YEAR = rf"(?:{_YEAR}|{_REL_YEAR})"
_PART = "|".join(sorted(_PARTS, key=len, reverse=True))

PATTERNS: list[tuple[str, _Resolver]] = [
    ("|".join(sorted(_DAY_STEPS, key=len, reverse=True)), _relative_day),
    ("|".join(sorted(_UNIT_STEPS, key=len, reverse=True)), _relative_unit),
    (r"(?P<rel>先|今|来|この\s*|)週末", _weekend),
    (
        rf"(?:(?P<rel>{_WEEK_WORDS}|次回の|次の|今度の|この前の|この間の?|こないだの|前の)"
        rf"\s*の?\s*)?{_WD}",
        _weekday,
    ),
    (
        rf"{_N}\s*(?P<unit>日|週|年|[ヶヵかカケ箇個]月)(?:間)?\s*(?P<dir>前|後)(?!半)",
        _offset,
    ),
    (r"(?P<n>半)年\s*(?P<dir>前|後)", _offset),
    (
        rf"(?:過去|ここ|この|直近|最近の?)\s*{_N}\s*(?P<unit>日|週|年|[ヶヵかカケ箇個]月)(?:間)?",
        _trailing_period,
    ),
    (r"(?<!\d)(?P<year>\d{4})[/.](?P<m>\d{1,2})[/.](?P<day>\d{1,2})(?!\d)", _slash_date),
    (rf"(?:{_ANY_YEAR}\s*の?\s*)?{_MONTH}\s*{_DAY}", _date),
    (
        rf"(?:{_ANY_YEAR}\s*の?\s*)?{_MONTH}(?!\s*[前後間]|\s*[\d{_KANJI}]+日)"
        rf"(?:の?\s*(?P<part>{_PART}))?",
        _month,
    ),
    (_YEAR, _year_only),
    (
        rf"(?:{_ANY_YEAR}\s*の?\s*|(?P<near>この|今|昨|来))(?P<season>[春夏秋冬])",
        _season,
    ),
]
