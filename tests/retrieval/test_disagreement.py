"""The contradiction detector (app/retrieval/fact_claims.py) and the newer-first order
(app/retrieval/disagreement.py), without services."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from app.retrieval.disagreement import Stated, later_of, newer_above
from app.retrieval.fact_claims import claims_of, contradicts

DAY = datetime(2024, 3, 1, tzinfo=UTC)


def disagree(older: str, newer: str, *, speakers: tuple[str | None, str | None] = (None, None)):
    first = Stated(uuid.uuid4(), older, speakers[0], DAY, DAY)
    second = Stated(uuid.uuid4(), newer, speakers[1], DAY + timedelta(days=30), DAY)
    return later_of([second, first]) == {first.key: second.key}


@pytest.mark.parametrize(
    ("older", "newer"),
    [
        ("Hi, I'm Priya. I live in Boston.", "I moved to Seattle last month."),
        ("I live in Lyon", "We moved from Lyon to Nantes in 2023"),
        ("I work at Google", "I got a new job at Stripe"),
        ("I work as a nurse at the city hospital", "I'm a software engineer now"),
        ("My wife is Anna", "I'm married to Sara"),
        ("I'm 34", "I turned 35 last week"),
        ("I'm studying law", "I study physics"),
        ("I am vegetarian", "I'm vegan now"),
        ("I'm vegan", "I eat meat again"),
        ("I'm learning the violin", "I stopped learning the violin"),
        ("I smoke", "I quit smoking"),
        ("I play tennis on Sundays", "I no longer play tennis"),
        ("I live in Boston", "I don't live in Boston anymore"),
        # The fact and its end, newest last either way: a restart contradicts the end too.
        ("I stopped learning the violin", "I'm learning the violin again"),
        ("Priya lives in Boston", "I live in Seattle"),  # her own name is her "I"
    ],
)
def test_contradicting_facts_of_one_person(older: str, newer: str) -> None:
    speaker = "Priya" if older.startswith("Priya") else None
    assert disagree(older, newer, speakers=(None, speaker))


@pytest.mark.parametrize(
    ("older", "newer"),
    [
        ("I live in Austin", "My sister lives in Denver"),  # two people
        ("I play tennis", "I play chess"),  # hobbies: many at once
        ("I'm learning Spanish", "I'm learning the guitar"),
        ("I live in Amsterdam", "I live in a houseboat in Amsterdam"),  # the same place
        ("I lived in Boston as a kid", "I live in Seattle"),  # the past is not a claim
        ("I'm moving to Berlin next year", "I live in Munich"),  # a plan is not a claim
        ("I have a son named Pablo", "I have a daughter named Lucia"),
        ("I'm Priya", "I'm a nurse"),
        ("I work at Google", "I work as an engineer"),  # two relations
        ("My wife is a nurse", "My wife is Anna"),
        ("I stopped learning the violin", "I play chess"),
    ],
)
def test_facts_that_can_both_hold(older: str, newer: str) -> None:
    assert not disagree(older, newer)


def test_two_speakers_first_person_facts_are_two_peoples() -> None:
    assert not disagree("I live in Boston", "I live in Seattle", speakers=("Caroline", "Melanie"))
    assert disagree("I live in Boston", "I live in Seattle", speakers=("Caroline", "Caroline"))


def test_the_newest_contradiction_is_named_and_equal_times_are_not_ordered() -> None:
    boston = Stated(uuid.uuid4(), "I live in Boston", None, DAY, DAY)
    seattle = Stated(uuid.uuid4(), "I live in Seattle", None, DAY + timedelta(days=1), DAY)
    denver = Stated(uuid.uuid4(), "I live in Denver", None, DAY + timedelta(days=2), DAY)
    assert later_of([boston, seattle, denver]) == {boston.key: denver.key, seattle.key: denver.key}
    # Same event time: the one stored later is newer; same times both: no order, no mark.
    stored_later = Stated(uuid.uuid4(), "I live in Paris", None, DAY, DAY + timedelta(hours=1))
    assert later_of([stored_later, boston]) == {boston.key: stored_later.key}
    twin = Stated(uuid.uuid4(), "I live in Paris", None, DAY, DAY)
    assert later_of([twin, boston]) == {}


def test_newer_above_moves_only_the_newer_item() -> None:
    assert newer_above(list("abcde"), {"b": "d"}) == list("adbce")
    assert newer_above(list("abcde"), {"d": "b"}) == list("abcde")  # already above
    # Chains: each newer item ends above every older one it contradicts.
    assert newer_above(list("abcd"), {"a": "d", "b": "d", "c": "d"}) == list("dabc")
    assert newer_above(list("abc"), {}) == list("abc")


def test_claims_of_read_the_value_not_the_times_around_it() -> None:
    (claim,) = claims_of("I moved to Seattle last month with my partner")
    assert (claim.subject, claim.relation, claim.value) == ("i", "reside", {"seattle"})
    assert claims_of("Tennis is great fun") == () or all(
        not c.single_valued for c in claims_of("Tennis is great fun")
    )
    (ended,) = claims_of("I have stopped working at Google")
    assert ended.ended and ended.relation == "work at"
    assert not contradicts(ended, ended)
