"""Corrections without an LLM, alone: which messages state a correction or retraction
(app/ingest/corrections.py, detect_intent), and which current memory it is about
(find_target). The measured precision and recall are bench/corrections.py's."""

from __future__ import annotations

import pytest

from app.ingest.corrections import detect_intent, find_target, frame_of, memory_frames
from app.ingest.domain import Candidate
from bench.corrections import shown_candidate

THRESHOLD = 0.6


def shown(*contents: str) -> list[Candidate]:
    return [shown_candidate(i, content, 0.5) for i, content in enumerate(contents, start=1)]


@pytest.mark.parametrize(
    ("message", "claim"),
    [
        ("Please forget that I'm vegetarian", "I am vegetarian"),
        ("Can you forget that I have a cat?", "I have a cat"),
        ("Forget that I said I'm allergic to penicillin", "I am allergic to penicillin"),
        ("I no longer play tennis.", "I play tennis"),
        ("I'm not married anymore", "I am married"),
        ("I don't drink coffee anymore, thank goodness", "I drink coffee"),
        ("My sister no longer lives in Berlin", "My sister lives in Berlin"),
        ("It's no longer true that I work at IBM", "I work at IBM"),
        ("I live in Tokyo - that's no longer true", "I live in Tokyo"),
    ],
)
def test_retractions_name_the_claim_they_end(message: str, claim: str) -> None:
    intent = detect_intent(message)
    assert intent is not None and intent.op == "DELETE"
    assert intent.claim == claim and intent.content is None


@pytest.mark.parametrize(
    ("message", "rule", "content"),
    [
        ("I moved to Osaka last month", "moved to", "I moved to Osaka last month"),
        ("Actually, I live in Osaka, not Tokyo.", "actually", "I live in Osaka"),
        ("I work at Microsoft now", "now", "I work at Microsoft"),
        ("These days I live in Bristol", "now", "I live in Bristol"),
        ("Correction: my birthday is on May 13", "actually", "My birthday is on May 13"),
        ("I no longer live in Tokyo, I live in Osaka now", "no longer, now", "I live in Osaka"),
        ("Quick update. I moved to Osaka in May.", "moved to", "I moved to Osaka in May"),
    ],
)
def test_corrections_keep_the_users_words(message: str, rule: str, content: str) -> None:
    intent = detect_intent(message)
    assert intent is not None and intent.op == "UPDATE"
    assert intent.rule == rule and intent.content == content


@pytest.mark.parametrize(
    "message",
    [
        "Actually I love it!",
        "I moved the meeting to Friday",
        "Forget about it, it's fine",
        "Forget that, let's talk about dinner",
        "Don't forget that I'm vegetarian",
        "I no longer remember her name",
        "Do you remember where I live?",
        "She no longer lives in Berlin",
        "Tom said he moved to Paris",
        "My friend moved to Osaka",
        "I don't eat meat",
        "Actually, I also like tea",
        "I now have a puppy",
        "I moved to a new team at work",
        "I work at my desk now",
        "I might move to Osaka next year",
        "That's no longer true.",
        # Two intents at once: not certain which to apply.
        "I moved to Osaka. I no longer work at IBM.",
    ],
)
def test_non_corrections_state_no_intent(message: str) -> None:
    assert detect_intent(message) is None


def test_frames_read_the_subject_and_the_kind_of_fact() -> None:
    assert frame_of("I have been living in Tokyo") == ("i", "reside")
    assert frame_of("I am based in Berlin") == ("i", "reside")
    assert frame_of("my favourite colour is blue") == ("my favourite colour", "be")
    assert frame_of("I am allergic to nuts") == ("i", "be allergic to")
    assert frame_of("I am a nurse") == ("i", "be a")
    assert frame_of("She lives in Rome") is None
    # A clause with no subject of its own has the one before it: two facts.
    assert memory_frames("I live in Tokyo and work at Sony") == [
        ("i", "reside"),
        ("i", "work at"),
    ]


def test_a_correction_targets_the_one_memory_of_its_kind_above_the_threshold() -> None:
    intent = detect_intent("I moved to Osaka")
    assert intent is not None
    home, sister, food = shown("I live in Tokyo", "My sister lives in Kyoto", "I love sushi")
    similarities = {home.memory_id: 0.9, sister.memory_id: 0.95, food.memory_id: 0.99}
    found = find_target(intent, [home, sister, food], similarities, THRESHOLD)
    assert found is not None and found.target is home  # the sister's home is not the user's
    assert "rule 'moved to'" in found.reason and "cosine 0.900" in found.reason
    # Below the threshold: no target (the message stays an ADD).
    assert find_target(intent, [home], {home.memory_id: 0.59}, THRESHOLD) is None


def test_uncertain_targets_are_none() -> None:
    intent = detect_intent("I moved to Osaka")
    assert intent is not None
    # Two memories of the same kind, both close enough: which one is meant is unknown.
    a, b = shown("I live in Tokyo", "I live in Nagoya")
    assert find_target(intent, [a, b], {a.memory_id: 0.8, b.memory_id: 0.7}, THRESHOLD) is None
    # A memory of two facts would lose the other one.
    (both,) = shown("I live in Tokyo and work at Sony")
    assert find_target(intent, [both], {both.memory_id: 0.9}, THRESHOLD) is None


def test_a_retraction_targets_only_a_memory_that_says_the_claim() -> None:
    intent = detect_intent("I no longer play tennis")
    assert intent is not None
    golf, tennis = shown("I play golf", "I play tennis every Sunday")
    similarities = {golf.memory_id: 0.95, tennis.memory_id: 0.8}
    found = find_target(intent, [golf, tennis], similarities, THRESHOLD)
    assert found is not None and found.target is tennis
    assert find_target(intent, [golf], similarities, THRESHOLD) is None


def test_a_memory_another_speaker_said_is_never_the_target() -> None:
    """In a conversation stored under one user, "I" is whoever spoke."""
    intent = detect_intent("I moved to Osaka")
    assert intent is not None
    (home,) = shown("I live in Tokyo")
    theirs = Candidate(**{**{f: getattr(home, f) for f in Candidate.__slots__}, "speaker": "Ana"})
    similarities = {home.memory_id: 0.9}
    assert find_target(intent, [theirs], similarities, THRESHOLD, speaker="Ben") is None
    assert find_target(intent, [theirs], similarities, THRESHOLD) is None
    found = find_target(intent, [theirs], similarities, THRESHOLD, speaker="Ana")
    assert found is not None and found.target is theirs


def test_an_addition_is_not_a_correction() -> None:
    intent = detect_intent("Actually, I'm learning a lot from the Spanish course")
    assert intent is not None
    (memory,) = shown("I am learning Spanish")
    assert find_target(intent, [memory], {memory.memory_id: 0.9}, THRESHOLD) is None
