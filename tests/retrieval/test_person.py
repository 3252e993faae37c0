"""The question in the user's own person (lever first_person): which words change, and that
nothing else does."""

from __future__ import annotations

import pytest

from app.retrieval.person import in_first_person


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
