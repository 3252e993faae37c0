"""A memory's sentences (app/memories/sentences.py), the binary COPY form of their vectors
(app/db/pgcopy.py) and the vector leg's choice among a memory's cosines, alone."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from app.db import pgcopy
from app.memories.repository import MemoryCosines
from app.memories.sentences import MAX_SENTENCES, sentence_texts, split_sentences


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


def test_a_vector_array_is_postgres_binary_array_of_pgvector_values() -> None:
    vectors = [np.array([1.0, 0.5], dtype=np.float32), np.array([0.25, -2.0], dtype=np.float32)]
    data = pgcopy.vector_array(4242)(vectors)
    ndim, flags, oid, length, lower = struct.unpack(">iiiii", data[:20])
    assert (ndim, flags, oid, length, lower) == (1, 0, 4242, 2, 1)
    offset, decoded = 20, []
    for _ in range(length):
        (size,) = struct.unpack(">i", data[offset : offset + 4])
        dims, _unused = struct.unpack(">hh", data[offset + 4 : offset + 8])
        decoded.append(np.frombuffer(data[offset + 8 : offset + 4 + size], dtype=">f4"))
        assert dims == 2
        offset += 4 + size
    assert offset == len(data)
    assert [v.tolist() for v in decoded] == [v.tolist() for v in vectors]
    assert struct.unpack(">iii", pgcopy.vector_array(4242)([])) == (0, 0, 4242)


def test_the_best_cosine_counts_only_the_vectors_asked_for() -> None:
    cosines = MemoryCosines(content=0.4, context=0.5, sentence=0.7)
    assert cosines.best(context=False, sentence=False) == 0.4
    assert cosines.best(context=True, sentence=False) == 0.5
    assert cosines.best(context=True, sentence=True) == 0.7
    assert cosines.best(context=False, sentence=True) == 0.7
    bare = MemoryCosines(content=0.4, context=None, sentence=None)
    assert bare.best(context=True, sentence=True) == 0.4
