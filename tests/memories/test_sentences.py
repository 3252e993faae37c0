"""A memory's sentences (app/memories/sentences.py) and the vector leg's choice among a
memory's cosines, alone."""

from __future__ import annotations

import pytest

from app.memories.sentences import MAX_SENTENCES, sentence_texts, split_sentences
from app.retrieval.vector_sql import MemoryCosines


def test_sentences_end_at_a_stop_before_a_capital() -> None:
    assert split_sentences(
        "I just signed up for a pottery class. The kids loved the dinosaur exhibit! "
        "Did you ever go to the museum in town?"
    ) == [
        "I just signed up for a pottery class.",
        "The kids loved the dinosaur exhibit!",
        "Did you ever go to the museum in town?",
    ]


def test_short_pieces_join_the_next_sentence_and_the_last_joins_the_one_before() -> None:
    assert split_sentences("Wow! That's great! I signed up for a pottery class.") == [
        "Wow! That's great! I signed up for a pottery class."
    ]
    assert split_sentences("I signed up for a pottery class yesterday. Love it!") == [
        "I signed up for a pottery class yesterday. Love it!"
    ]


@pytest.mark.parametrize(
    "text",
    [
        "We met at 3.30 p.m. in the park near the lake",  # stops before no capital
        "I paid $4.50 for it, e.g. a bargain, and it works",
        "She said it was fine!",
        "",
    ],
)
def test_text_without_two_sentences_splits_into_at_most_one(text: str) -> None:
    assert len(split_sentences(text)) <= 1
    assert sentence_texts(text, "Ann") == []


def test_each_sentence_is_a_transcript_line_of_its_speaker() -> None:
    content = "I moved to Lisbon last spring. My sister visits me every month."
    assert sentence_texts(content, "Ann") == [
        "Ann: I moved to Lisbon last spring.",
        "Ann: My sister visits me every month.",
    ]
    assert sentence_texts(content, None) == [
        "I moved to Lisbon last spring.",
        "My sister visits me every month.",
    ]
    # A LoCoMo-style line that names its speaker already is not named twice.
    line = "Ann: I moved to Lisbon last spring. My sister visits me every month."
    assert sentence_texts(line, "Ann")[0] == "Ann: I moved to Lisbon last spring."


def test_a_long_memory_gets_at_most_the_bounded_number_of_sentences() -> None:
    content = " ".join(f"Sentence number {i} says one more thing." for i in range(30))
    assert len(sentence_texts(content, None)) == MAX_SENTENCES


def test_the_best_cosine_counts_only_the_vectors_asked_for() -> None:
    cosines = MemoryCosines(content=0.4, context=0.5, sentence=0.7)
    assert cosines.best(context=False, sentence=False) == 0.4
    assert cosines.best(context=True, sentence=False) == 0.5
    assert cosines.best(context=True, sentence=True) == 0.7
    assert cosines.best(context=False, sentence=True) == 0.7
    bare = MemoryCosines(content=0.4, context=None, sentence=None)
    assert bare.best(context=True, sentence=True) == 0.4
