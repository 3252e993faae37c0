"""The question in the user's own person (lever first_person): which words change, and that
nothing else does."""

from __future__ import annotations

from typing import Any

import pytest

from app.memories.filters import parse_filter
from app.retrieval.person import about_an_entity, in_first_person

_MELANIE = {"field": "entity", "op": "eq", "value": "Melanie"}


@pytest.mark.parametrize(
    ("asked", "embedded"),
    [
        ("What does she do for a living?", "What does I do for a living?"),
        ("Which city are you in?", "Which city are I in?"),
        ("Where is his office now?", "Where is my office now?"),
        ("Who looks after HER kids?", "Who looks after my kids?"),
        ("Is that book yours or hers?", "Is that book mine or mine?"),
        ("Did he hurt himself?", "Did I hurt myself?"),
        ("What did you tell him?", "What did I tell me?"),
        ("What\u2019s her dog called?", "What\u2019s my dog called?"),
    ],
)
def test_second_and_third_person_pronouns_become_first_person(asked: str, embedded: str) -> None:
    assert in_first_person(asked) == embedded


@pytest.mark.parametrize(
    "question",
    [
        "Where does Hershey's factory stand?",  # a pronoun inside a word is no pronoun
        "What did Caroline research?",
        "Which city do I live in?",
        "Where do they live?",  # plural: other people, not the user
        "¿Dónde vive ella?",
        "彼女はどこに住んでいますか",
        "Shelly and Heather went hiking",
    ],
)
def test_a_question_without_them_is_left_as_it_is(question: str) -> None:
    assert in_first_person(question) == question


def test_filtered_to_an_entity_only_the_second_person_turns() -> None:
    """ "she" in a search filtered to Melanie is Melanie; "you" is still the user."""
    assert in_first_person("What does she tell you?", third_person=False) == (
        "What does she tell I?"
    )
    assert in_first_person("Where is his office?", third_person=False) == "Where is his office?"


@pytest.mark.parametrize(
    ("tree", "about"),
    [
        ({"field": "entity", "op": "eq", "value": "Melanie"}, True),
        ({"field": "entity", "op": "in", "value": ["Melanie", "Mel"]}, True),
        (
            {"and": [{"field": "category", "op": "eq", "value": "hobbies"}, _MELANIE]},
            True,
        ),
        ({"or": [_MELANIE, {"field": "entity", "op": "eq", "value": "Boston"}]}, True),
        # Some matches need not name the entity: their pronouns may be the user.
        ({"or": [_MELANIE, {"field": "category", "op": "eq", "value": "hobbies"}]}, False),
        ({"field": "entity", "op": "nin", "value": ["Melanie"]}, False),
        ({"not": _MELANIE}, False),
        ({"field": "category", "op": "eq", "value": "hobbies"}, False),
        (None, False),
    ],
)
def test_a_filter_is_about_an_entity_when_every_match_names_one(
    tree: dict[str, Any] | None, about: bool
) -> None:
    assert about_an_entity(parse_filter(tree) if tree is not None else None) is about
