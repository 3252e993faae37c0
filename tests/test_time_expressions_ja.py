"""Japanese time expressions against fixed reference datetimes (pure Python, no services)."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from app.time_expressions import primary_window, resolve_time_expressions
from app.time_expressions.japanese import kanji_number

MON = datetime(2023, 5, 8, 10, 0, tzinfo=UTC)  # Monday
FRI = datetime(2023, 5, 12, 15, 0, tzinfo=UTC)  # Friday
SUN = datetime(2023, 5, 14, 12, 0, tzinfo=UTC)  # Sunday
JAN = datetime(2024, 1, 10, 9, 0, tzinfo=UTC)  # Wednesday, tests year wrap

D = date

CASES: list[tuple[str, datetime, date, date, str]] = [
    # relative days
    ("昨日", MON, D(2023, 5, 7), D(2023, 5, 8), "day"),
    ("きのう", MON, D(2023, 5, 7), D(2023, 5, 8), "day"),
    ("昨夜", MON, D(2023, 5, 7), D(2023, 5, 8), "day"),
    ("一昨日", MON, D(2023, 5, 6), D(2023, 5, 7), "day"),
    ("おととい", MON, D(2023, 5, 6), D(2023, 5, 7), "day"),
    ("今日", MON, D(2023, 5, 8), D(2023, 5, 9), "day"),
    ("今朝", MON, D(2023, 5, 8), D(2023, 5, 9), "day"),
    ("明日", MON, D(2023, 5, 9), D(2023, 5, 10), "day"),
    ("明後日", MON, D(2023, 5, 10), D(2023, 5, 11), "day"),
    ("昨日", JAN.replace(day=1), D(2023, 12, 31), D(2024, 1, 1), "day"),
    # week, month, year
    ("先週", MON, D(2023, 5, 1), D(2023, 5, 8), "week"),
    ("今週", FRI, D(2023, 5, 8), D(2023, 5, 15), "week"),
    ("来週", MON, D(2023, 5, 15), D(2023, 5, 22), "week"),
    ("再来週", MON, D(2023, 5, 22), D(2023, 5, 29), "week"),
    ("先月", MON, D(2023, 4, 1), D(2023, 5, 1), "month"),
    ("先月", JAN, D(2023, 12, 1), D(2024, 1, 1), "month"),
    ("今月", MON, D(2023, 5, 1), D(2023, 6, 1), "month"),
    ("来月", JAN, D(2024, 2, 1), D(2024, 3, 1), "month"),
    ("去年", MON, D(2022, 1, 1), D(2023, 1, 1), "year"),
    ("昨年", MON, D(2022, 1, 1), D(2023, 1, 1), "year"),
    ("一昨年", MON, D(2021, 1, 1), D(2022, 1, 1), "year"),
    ("今年", MON, D(2023, 1, 1), D(2024, 1, 1), "year"),
    ("来年", MON, D(2024, 1, 1), D(2025, 1, 1), "year"),
    # weekends
    ("週末", MON, D(2023, 5, 6), D(2023, 5, 8), "weekend"),
    ("先週末", MON, D(2023, 5, 6), D(2023, 5, 8), "weekend"),
    ("来週末", MON, D(2023, 5, 13), D(2023, 5, 15), "weekend"),
    ("今週末", MON, D(2023, 5, 13), D(2023, 5, 15), "weekend"),
    ("今週末", SUN, D(2023, 5, 13), D(2023, 5, 15), "weekend"),
    # offsets, in digits, full-width digits and kanji numerals
    ("3日前", MON, D(2023, 5, 5), D(2023, 5, 6), "day"),
    ("３日前", MON, D(2023, 5, 5), D(2023, 5, 6), "day"),
    ("三日前", MON, D(2023, 5, 5), D(2023, 5, 6), "day"),
    ("十日後", MON, D(2023, 5, 18), D(2023, 5, 19), "day"),
    ("2週間前", MON, D(2023, 4, 24), D(2023, 5, 1), "week"),
    ("二週間後", MON, D(2023, 5, 22), D(2023, 5, 29), "week"),
    ("3ヶ月前", MON, D(2023, 2, 1), D(2023, 3, 1), "month"),
    ("3か月前", MON, D(2023, 2, 1), D(2023, 3, 1), "month"),
    ("三箇月前", MON, D(2023, 2, 1), D(2023, 3, 1), "month"),
    ("2カ月後", MON, D(2023, 7, 1), D(2023, 8, 1), "month"),
    ("半年前", MON, D(2022, 11, 1), D(2022, 12, 1), "month"),
    ("5年前", MON, D(2018, 1, 1), D(2019, 1, 1), "year"),
    ("数日前", MON, D(2023, 5, 5), D(2023, 5, 6), "day"),
    ("ここ3日間", MON, D(2023, 5, 5), D(2023, 5, 9), "range"),
    ("過去2週間", MON, D(2023, 4, 24), D(2023, 5, 9), "range"),
    # weekdays: bare = most recent on or before; 先週の/来週の = that calendar week's
    ("月曜日", MON, D(2023, 5, 8), D(2023, 5, 9), "day"),
    ("金曜日", MON, D(2023, 5, 5), D(2023, 5, 6), "day"),
    ("金曜", FRI, D(2023, 5, 12), D(2023, 5, 13), "day"),
    ("先週の月曜日", MON, D(2023, 5, 1), D(2023, 5, 2), "day"),
    ("先週の金曜日", FRI, D(2023, 5, 5), D(2023, 5, 6), "day"),
    ("来週の金曜日", MON, D(2023, 5, 19), D(2023, 5, 20), "day"),
    ("今週の水曜日", FRI, D(2023, 5, 10), D(2023, 5, 11), "day"),
    ("次の金曜日", FRI, D(2023, 5, 19), D(2023, 5, 20), "day"),
    ("この前の金曜日", FRI, D(2023, 5, 5), D(2023, 5, 6), "day"),
    # dates
    ("5月3日", MON, D(2023, 5, 3), D(2023, 5, 4), "day"),
    ("５月３日", MON, D(2023, 5, 3), D(2023, 5, 4), "day"),
    ("五月三日", MON, D(2023, 5, 3), D(2023, 5, 4), "day"),
    ("四月二十三日", MON, D(2023, 4, 23), D(2023, 4, 24), "day"),
    ("12月24日", MON, D(2022, 12, 24), D(2022, 12, 25), "day"),
    ("2023年5月3日", JAN, D(2023, 5, 3), D(2023, 5, 4), "day"),
    ("2023/5/3", JAN, D(2023, 5, 3), D(2023, 5, 4), "day"),
    ("2021.12.31", JAN, D(2021, 12, 31), D(2022, 1, 1), "day"),
    ("令和5年5月3日", JAN, D(2023, 5, 3), D(2023, 5, 4), "day"),
    ("令和元年5月1日", JAN, D(2019, 5, 1), D(2019, 5, 2), "day"),
    ("去年の12月24日", MON, D(2022, 12, 24), D(2022, 12, 25), "day"),
    # months, years, seasons
    ("5月", MON, D(2023, 5, 1), D(2023, 6, 1), "month"),
    ("6月", MON, D(2022, 6, 1), D(2022, 7, 1), "month"),
    ("十二月", MON, D(2022, 12, 1), D(2023, 1, 1), "month"),
    ("2023年5月", JAN, D(2023, 5, 1), D(2023, 6, 1), "month"),
    ("来年の3月", MON, D(2024, 3, 1), D(2024, 4, 1), "month"),
    ("去年の5月", MON, D(2022, 5, 1), D(2022, 6, 1), "month"),
    ("3月下旬", MON, D(2023, 3, 21), D(2023, 4, 1), "range"),
    ("4月の上旬", MON, D(2023, 4, 1), D(2023, 4, 11), "range"),
    ("2020年", MON, D(2020, 1, 1), D(2021, 1, 1), "year"),
    ("令和5年", JAN, D(2023, 1, 1), D(2024, 1, 1), "year"),
    ("平成30年", JAN, D(2018, 1, 1), D(2019, 1, 1), "year"),
    ("昭和64年", JAN, D(1989, 1, 1), D(1990, 1, 1), "year"),
    ("去年の夏", MON, D(2022, 6, 1), D(2022, 9, 1), "range"),
    ("2021年の秋", MON, D(2021, 9, 1), D(2021, 12, 1), "range"),
    ("この冬", JAN, D(2023, 12, 1), D(2024, 3, 1), "range"),
    ("昨夏", MON, D(2022, 6, 1), D(2022, 9, 1), "range"),
]


@pytest.mark.parametrize(("text", "reference", "start", "end", "granularity"), CASES)
def test_resolves(text: str, reference: datetime, start: date, end: date, granularity: str) -> None:
    (window,) = resolve_time_expressions(text, reference)
    assert (window.start.date(), window.end.date(), window.granularity) == (
        start,
        end,
        granularity,
    )
    assert window.text == text


@pytest.mark.parametrize(
    ("sentence", "expression", "start"),
    [
        ("昨日、大阪に引っ越しました", "昨日", D(2023, 5, 7)),
        ("先週の金曜日に友達と映画を見た", "先週の金曜日", D(2023, 5, 5)),
        ("3日前から風邪気味です", "3日前", D(2023, 5, 5)),
        ("来月、札幌に出張します", "来月", D(2023, 6, 1)),
        ("先月は何をしましたか？", "先月", D(2023, 4, 1)),  # noqa: RUF001
        ("2023年5月3日に結婚しました", "2023年5月3日", D(2023, 5, 3)),
        ("I moved to Osaka 昨日", "昨日", D(2023, 5, 7)),
    ],
)
def test_in_a_sentence(sentence: str, expression: str, start: date) -> None:
    window = primary_window(sentence, MON)
    assert window is not None
    assert (window.text, window.start.date()) == (expression, start)


@pytest.mark.parametrize(
    "text",
    [
        "大阪に住んでいます",
        "毎日ジムに通っている",  # 毎日 is every day, not a day
        "2年生のときに野球を始めた",  # a school year, not the year 2
        "2023年度の予算",  # a fiscal year is not the calendar year
        "3人で行った",
        "月に一度",
    ],
)
def test_no_time_expression(text: str) -> None:
    assert resolve_time_expressions(text, MON) == []


def test_invalid_dates_are_skipped() -> None:
    # Neither the impossible day nor the month around it: only the year stands.
    (window,) = resolve_time_expressions("2023年2月30日", MON)
    assert (window.text, window.granularity) == ("2023年", "year")
    assert resolve_time_expressions("13月", MON) == []


def test_longest_expression_wins() -> None:
    # 先週の金曜日 holds 先週 and 金曜日; 一昨日 holds 昨日; 5月3日 holds 5月.
    texts = [w.text for w in resolve_time_expressions("一昨日と先週の金曜日と5月3日", MON)]
    assert texts == ["一昨日", "先週の金曜日", "5月3日"]


@pytest.mark.parametrize(
    ("text", "value"),
    [("3", 3), ("１２", 12), ("三", 3),  # noqa: RUF001 ("十", 10), ("十二", 12), ("二十三", 23), ("百五", 105),
     ("二〇二三", 2023), ("数", 3)],
)  # fmt: skip
def test_kanji_number(text: str, value: int) -> None:
    assert kanji_number(text) == value
