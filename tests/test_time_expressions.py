"""Time-expression resolution against fixed reference datetimes (pure Python, no services)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, date, datetime, timedelta, timezone

import pytest

from app.time_expressions import TimeWindow, primary_window, resolve_time_expressions

MON = datetime(2023, 5, 8, 10, 0, tzinfo=UTC)  # Monday
FRI = datetime(2023, 5, 12, 15, 0, tzinfo=UTC)  # Friday
SUN = datetime(2023, 5, 14, 12, 0, tzinfo=UTC)  # Sunday
JAN = datetime(2024, 1, 10, 9, 0, tzinfo=UTC)  # Wednesday, tests year wrap
MAR = datetime(2023, 3, 5, 9, 0, tzinfo=UTC)  # Sunday, after a 28-day February

D = date

CASES: list[tuple[str, datetime, date, date, str]] = [
    # relative days
    ("today", MON, D(2023, 5, 8), D(2023, 5, 9), "day"),
    ("tonight", MON, D(2023, 5, 8), D(2023, 5, 9), "day"),
    ("this morning", MON, D(2023, 5, 8), D(2023, 5, 9), "day"),
    ("this evening", MON, D(2023, 5, 8), D(2023, 5, 9), "day"),
    ("yesterday", MON, D(2023, 5, 7), D(2023, 5, 8), "day"),
    ("yesterday evening", MON, D(2023, 5, 7), D(2023, 5, 8), "day"),
    ("last night", MON, D(2023, 5, 7), D(2023, 5, 8), "day"),
    ("the day before yesterday", MON, D(2023, 5, 6), D(2023, 5, 7), "day"),
    ("tomorrow", MON, D(2023, 5, 9), D(2023, 5, 10), "day"),
    ("the day after tomorrow", MON, D(2023, 5, 10), D(2023, 5, 11), "day"),
    ("yesterday", JAN.replace(day=1), D(2023, 12, 31), D(2024, 1, 1), "day"),
    # last/this/next week, month, year
    ("last week", MON, D(2023, 5, 1), D(2023, 5, 8), "week"),
    ("this week", SUN, D(2023, 5, 8), D(2023, 5, 15), "week"),
    ("next week", MON, D(2023, 5, 15), D(2023, 5, 22), "week"),
    ("last month", MON, D(2023, 4, 1), D(2023, 5, 1), "month"),
    ("this month", MON, D(2023, 5, 1), D(2023, 6, 1), "month"),
    ("next month", MON, D(2023, 6, 1), D(2023, 7, 1), "month"),
    ("last month", JAN, D(2023, 12, 1), D(2024, 1, 1), "month"),
    ("next month", JAN, D(2024, 2, 1), D(2024, 3, 1), "month"),
    ("last year", MON, D(2022, 1, 1), D(2023, 1, 1), "year"),
    ("this year", MON, D(2023, 1, 1), D(2024, 1, 1), "year"),
    ("next year", JAN, D(2025, 1, 1), D(2026, 1, 1), "year"),
    # weekends
    ("over the weekend", MON, D(2023, 5, 6), D(2023, 5, 8), "weekend"),
    ("the weekend", FRI, D(2023, 5, 6), D(2023, 5, 8), "weekend"),
    ("last weekend", MON, D(2023, 5, 6), D(2023, 5, 8), "weekend"),
    ("next weekend", MON, D(2023, 5, 13), D(2023, 5, 15), "weekend"),
    ("this weekend", SUN, D(2023, 5, 13), D(2023, 5, 15), "weekend"),
    ("last weekend", SUN, D(2023, 5, 6), D(2023, 5, 8), "weekend"),
    ("next weekend", SUN, D(2023, 5, 20), D(2023, 5, 22), "weekend"),
    # weekdays
    ("last Friday", MON, D(2023, 5, 5), D(2023, 5, 6), "day"),
    ("last Friday", FRI, D(2023, 5, 5), D(2023, 5, 6), "day"),
    ("on Friday", FRI, D(2023, 5, 12), D(2023, 5, 13), "day"),
    ("on Friday", MON, D(2023, 5, 5), D(2023, 5, 6), "day"),
    ("I saw her friday", MON, D(2023, 5, 5), D(2023, 5, 6), "day"),
    ("next Friday", MON, D(2023, 5, 12), D(2023, 5, 13), "day"),
    ("next Friday", FRI, D(2023, 5, 19), D(2023, 5, 20), "day"),
    ("this Friday", MON, D(2023, 5, 12), D(2023, 5, 13), "day"),
    ("this Friday", SUN, D(2023, 5, 12), D(2023, 5, 13), "day"),
    ("last Monday", MON, D(2023, 5, 1), D(2023, 5, 2), "day"),
    ("on Monday", MON, D(2023, 5, 8), D(2023, 5, 9), "day"),
    ("this past Saturday", SUN, D(2023, 5, 13), D(2023, 5, 14), "day"),
    # N units ago / in N units
    ("3 days ago", MON, D(2023, 5, 5), D(2023, 5, 6), "day"),
    ("a couple of days ago", MON, D(2023, 5, 6), D(2023, 5, 7), "day"),
    ("two weeks ago", MON, D(2023, 4, 24), D(2023, 5, 1), "week"),
    ("a few weeks ago", MON, D(2023, 4, 17), D(2023, 4, 24), "week"),
    ("a month ago", MON, D(2023, 4, 1), D(2023, 5, 1), "month"),
    ("a month ago", JAN, D(2023, 12, 1), D(2024, 1, 1), "month"),
    ("several months ago", MON, D(2023, 2, 1), D(2023, 3, 1), "month"),
    ("twelve months ago", MON, D(2022, 5, 1), D(2022, 6, 1), "month"),
    ("2 years ago", MON, D(2021, 1, 1), D(2022, 1, 1), "year"),
    ("in 3 days", MON, D(2023, 5, 11), D(2023, 5, 12), "day"),
    ("in two weeks", MON, D(2023, 5, 22), D(2023, 5, 29), "week"),
    ("in a month", JAN, D(2024, 2, 1), D(2024, 3, 1), "month"),
    ("in 2 years", MON, D(2025, 1, 1), D(2026, 1, 1), "year"),
    # trailing periods
    ("the past 7 days", MON, D(2023, 5, 1), D(2023, 5, 9), "range"),
    ("the last two weeks", MON, D(2023, 4, 24), D(2023, 5, 9), "range"),
    ("the past 3 months", MON, D(2023, 2, 8), D(2023, 5, 9), "range"),
    ("over the past week", MON, D(2023, 5, 1), D(2023, 5, 9), "range"),
    ("the past year", MON, D(2022, 5, 8), D(2023, 5, 9), "range"),
    ("last few days", MON, D(2023, 5, 5), D(2023, 5, 9), "range"),
    # month names
    ("in May", MON, D(2023, 5, 1), D(2023, 6, 1), "month"),
    ("in may", MON, D(2023, 5, 1), D(2023, 6, 1), "month"),
    ("in June", MON, D(2022, 6, 1), D(2022, 7, 1), "month"),
    ("during March", MON, D(2023, 3, 1), D(2023, 4, 1), "month"),
    ("since April", MON, D(2023, 4, 1), D(2023, 5, 1), "month"),
    ("last May", MON, D(2022, 5, 1), D(2022, 6, 1), "month"),
    ("next May", MON, D(2024, 5, 1), D(2024, 6, 1), "month"),
    ("this June", MON, D(2023, 6, 1), D(2023, 7, 1), "month"),
    ("May 2021", MON, D(2021, 5, 1), D(2021, 6, 1), "month"),
    ("in Sept. 2020", MON, D(2020, 9, 1), D(2020, 10, 1), "month"),
    ("in December", JAN, D(2023, 12, 1), D(2024, 1, 1), "month"),
    ("last December", JAN, D(2023, 12, 1), D(2024, 1, 1), "month"),
    # early / mid / late month
    ("early May 2023", MON, D(2023, 5, 1), D(2023, 5, 11), "range"),
    ("mid-May", MON, D(2023, 5, 11), D(2023, 5, 21), "range"),
    ("in late April", MON, D(2023, 4, 21), D(2023, 5, 1), "range"),
    ("late February 2024", MON, D(2024, 2, 21), D(2024, 3, 1), "range"),
    # explicit dates
    ("8 May 2023", MON, D(2023, 5, 8), D(2023, 5, 9), "day"),
    ("May 8, 2023", FRI, D(2023, 5, 8), D(2023, 5, 9), "day"),
    ("May 8th", MON, D(2023, 5, 8), D(2023, 5, 9), "day"),
    ("May 9th", MON, D(2022, 5, 9), D(2022, 5, 10), "day"),
    ("next May 9", MON, D(2023, 5, 9), D(2023, 5, 10), "day"),
    ("8th of May", MON, D(2023, 5, 8), D(2023, 5, 9), "day"),
    ("the 4th of July", MON, D(2022, 7, 4), D(2022, 7, 5), "day"),
    ("Dec 24", JAN, D(2023, 12, 24), D(2023, 12, 25), "day"),
    ("2023-05-08", SUN, D(2023, 5, 8), D(2023, 5, 9), "day"),
    ("5/8/2023", SUN, D(2023, 5, 8), D(2023, 5, 9), "day"),
    ("12/25/22", MON, D(2022, 12, 25), D(2022, 12, 26), "day"),
    ("on the 8th", MON, D(2023, 5, 8), D(2023, 5, 9), "day"),
    ("on the 9th", MON, D(2023, 4, 9), D(2023, 4, 10), "day"),
    ("on the 30th", MAR, D(2023, 1, 30), D(2023, 1, 31), "day"),
    # years
    ("in 2022", MON, D(2022, 1, 1), D(2023, 1, 1), "year"),
    ("since 2019", MON, D(2019, 1, 1), D(2020, 1, 1), "year"),
    ("during 2020", MON, D(2020, 1, 1), D(2021, 1, 1), "year"),
    ("early 2022", MON, D(2022, 1, 1), D(2022, 5, 1), "range"),
    ("late 2021", MON, D(2021, 9, 1), D(2022, 1, 1), "range"),
    # ranges
    ("between 1 and 5 May 2023", MON, D(2023, 5, 1), D(2023, 5, 6), "range"),
    ("from 3 to 7 April", MON, D(2023, 4, 3), D(2023, 4, 8), "range"),
    ("May 1-5, 2023", MON, D(2023, 5, 1), D(2023, 5, 6), "range"),
    ("May 1\u20135, 2023", MON, D(2023, 5, 1), D(2023, 5, 6), "range"),  # en dash
    ("from May to July 2023", JAN, D(2023, 5, 1), D(2023, 8, 1), "range"),
    ("between November and February", JAN, D(2023, 11, 1), D(2024, 3, 1), "range"),
    ("from 2020 to 2022", MON, D(2020, 1, 1), D(2023, 1, 1), "range"),
    ("between 2023-05-01 and 2023-05-05", MON, D(2023, 5, 1), D(2023, 5, 6), "range"),
    ("from last Monday to yesterday", MON, D(2023, 5, 1), D(2023, 5, 8), "range"),
    # seasons (northern hemisphere)
    ("last summer", MON, D(2022, 6, 1), D(2022, 9, 1), "range"),
    ("next summer", MON, D(2023, 6, 1), D(2023, 9, 1), "range"),
    ("this spring", MON, D(2023, 3, 1), D(2023, 6, 1), "range"),
    ("in the fall", MON, D(2022, 9, 1), D(2022, 12, 1), "range"),
    ("the summer of 2021", MON, D(2021, 6, 1), D(2021, 9, 1), "range"),
    ("this winter", JAN, D(2023, 12, 1), D(2024, 3, 1), "range"),
    ("last winter", JAN, D(2022, 12, 1), D(2023, 3, 1), "range"),
]


@pytest.mark.parametrize(("text", "reference", "start", "end", "granularity"), CASES)
def test_resolves_expression(
    text: str, reference: datetime, start: date, end: date, granularity: str
) -> None:
    windows = resolve_time_expressions(text, reference)
    assert len(windows) == 1, windows
    window = windows[0]
    assert (window.start.date(), window.end.date(), window.granularity) == (
        start,
        end,
        granularity,
    )
    assert window.start.time() == window.end.time() == datetime.min.time()
    assert window.start.tzinfo is reference.tzinfo


@pytest.mark.parametrize(
    "text",
    [
        "I may go to the gym",
        "May I help you?",
        "this may help",
        "These 3 may be late",
        "I have 3 dogs",
        "version 2.0 shipped",
        # A bare 4-digit number is not a year without a preposition: too often a room or a count.
        "room 2022 is free",
        "Fridays are busy",
        "the fall of Rome",
        "spring is my favourite season",
        "",
    ],
)
def test_ignores_non_time_text(text: str) -> None:
    assert resolve_time_expressions(text, MON) == []
    assert primary_window(text, MON) is None


def test_text_is_the_expression_as_written() -> None:
    window = primary_window("What did I do Last Week at work?", MON)
    assert window is not None
    assert window.text == "Last Week"


def test_longest_match_wins() -> None:
    windows = resolve_time_expressions("the day before yesterday", MON)
    assert [w.text for w in windows] == ["the day before yesterday"]
    windows = resolve_time_expressions("Meet on 8th of May 2021 please", MON)
    assert [(w.text, w.start.date()) for w in windows] == [("8th of May 2021", D(2021, 5, 8))]


def test_several_expressions_in_order_of_appearance() -> None:
    text = "Yesterday I met Ann; last Friday we booked Paris for May 2024, and 3 days ago I paid."
    windows = resolve_time_expressions(text, MON)
    assert [(w.text, w.start.date()) for w in windows] == [
        ("Yesterday", D(2023, 5, 7)),
        ("last Friday", D(2023, 5, 5)),
        ("May 2024", D(2024, 5, 1)),
        ("3 days ago", D(2023, 5, 5)),
    ]
    first = primary_window(text, MON)
    assert first is not None and first.text == "Yesterday"


def test_keeps_reference_timezone() -> None:
    tokyo = timezone(timedelta(hours=9))
    # 01:00 on 8 May in Tokyo is still 7 May in UTC: the local date must drive the result.
    reference = datetime(2023, 5, 8, 1, 0, tzinfo=tokyo)
    window = primary_window("yesterday", reference)
    assert window is not None
    assert window.start == datetime(2023, 5, 7, tzinfo=tokyo)
    assert window.end == datetime(2023, 5, 8, tzinfo=tokyo)
    assert window.start.utcoffset() == timedelta(hours=9)


def test_naive_reference_is_utc() -> None:
    window = primary_window("tomorrow", datetime(2023, 5, 8, 23, 30))
    assert window is not None
    assert window.start == datetime(2023, 5, 9, tzinfo=UTC)
    assert window.start.tzinfo is UTC


def test_days_and_center() -> None:
    week = primary_window("last week", MON)
    assert week is not None
    assert week.days == 7.0
    assert week.center == datetime(2023, 5, 4, 12, 0, tzinfo=UTC)
    weekend = primary_window("over the weekend", MON)
    assert weekend is not None and weekend.days == 2.0


def test_window_is_frozen() -> None:
    window = TimeWindow(MON, MON + timedelta(days=1), "today", "day")
    with pytest.raises(dataclasses.FrozenInstanceError):
        window.text = "tomorrow"  # type: ignore[misc]


def test_invalid_calendar_dates_are_skipped() -> None:
    assert resolve_time_expressions("2023-02-30", MON) == []
    assert resolve_time_expressions("13/45/2023", MON) == []


@pytest.mark.parametrize(
    "reference", [datetime(1, 1, 1, tzinfo=UTC), datetime(9999, 12, 31, 23, tzinfo=UTC)]
)
@pytest.mark.parametrize(
    "phrase",
    [
        "yesterday",
        "tomorrow",
        "last year",
        "next year",
        "last month",
        "next month",
        "last week",
        "next week",
        "in 3 days",
        "3 days ago",
        "last Friday",
        "in summer",
    ],
)
def test_the_calendar_edges_give_no_window_rather_than_an_overflow(reference, phrase) -> None:
    for window in resolve_time_expressions(f"what happened {phrase}?", reference):
        assert window.start < window.end


# Tense: a bare point of a cycle in a clause about the future is its next occurrence.
DEC = datetime(2026, 12, 7, 10, 0, tzinfo=timezone(timedelta(hours=-8)))  # Monday, Seattle

TENSE_CASES: list[tuple[str, date]] = [
    ("We're expecting a second child in May.", D(2027, 5, 1)),
    ("We’ll fly to Rome in May", D(2027, 5, 1)),  # noqa: RUF001 (a typographic apostrophe)
    ("I'm going to Kyoto in April", D(2027, 4, 1)),
    ("I am planning a trip in June", D(2027, 6, 1)),
    ("The baby is due May 8th", D(2027, 5, 8)),
    ("I will call you on Friday", D(2026, 12, 11)),
    ("I will pay on the 3rd", D(2027, 1, 3)),
    ("We want to go skiing in winter", D(2026, 12, 1)),  # the current one while it lasts
    ("We're expecting in December", D(2026, 12, 1)),
    ("In May, we'll move", D(2027, 5, 1)),
    ("We will travel between May and June", D(2027, 5, 1)),
    # Reports of the past keep the past bias.
    ("I went to Lisbon in May", D(2026, 5, 1)),
    ("I saw her on Friday", D(2026, 12, 4)),
    ("We were planning to go in May", D(2026, 5, 1)),
    ("I moved to Seattle last month.", D(2026, 11, 1)),
    # An expression that says its own direction or year is left as it is.
    ("I will finally frame the photo from last May", D(2026, 5, 1)),
    ("We will celebrate what happened in May 2026", D(2026, 5, 1)),
    ("I will tell you about the 3 days ago thing", D(2026, 12, 4)),
]


@pytest.mark.parametrize(("text", "start"), TENSE_CASES, ids=[c[0] for c in TENSE_CASES])
def test_tense_sets_the_direction_of_a_bare_point(text: str, start: date) -> None:
    window = primary_window(text, DEC)
    assert window is not None
    assert window.start == datetime.combine(start, datetime.min.time(), tzinfo=DEC.tzinfo)


def test_each_clause_has_its_own_tense() -> None:
    text = "I moved here in March and we're expecting a child in May"
    starts = [w.start.date() for w in resolve_time_expressions(text, DEC)]
    assert starts == [D(2026, 3, 1), D(2027, 5, 1)]
