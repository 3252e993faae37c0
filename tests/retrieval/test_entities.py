"""The entity, speaker-free query, feedback and typed-weights levers on plain data: no
services."""

from __future__ import annotations

import numpy as np
import pytest

from app.retrieval.entities import boost_shared_entities, names_something, query_entities
from app.retrieval.fusion import BALANCED, LEXICAL, leg_weights
from app.retrieval.speakers import without_names
from app.retrieval.vector_leg import rocchio
from tests.retrieval.test_stages import make

SPEAKERS = ("Caroline", "Melanie", "Jo")


class TestQueryEntities:
    @pytest.mark.parametrize(
        ("query", "entities"),
        [
            ("What books has Caroline read?", []),  # a speaker is the speaker lever's
            ("Which places has Caroline visited in Tokyo?", ["Tokyo"]),
            ("When did we go to New York City?", ["New York City"]),
            ('What did she think of "Becoming Nicole"?', ["Becoming Nicole"]),
            ("Have I read The Name of the Wind?", ["The Name of the Wind"]),
            ("Did Melanie and Caroline both visit Paris and Rome?", ["Paris", "Rome"]),
            ("Is the LGBTQ centre open?", ["LGBTQ"]),
            ("what is the weather like", []),
            ("Where? When? How?", []),
        ],
    )
    def test_names_titles_and_places_not_question_words(
        self, query: str, entities: list[str]
    ) -> None:
        assert query_entities(query, SPEAKERS) == entities

    def test_a_speakers_name_inside_a_longer_name_stays(self) -> None:
        assert query_entities("Is Jo Malone a shop?", SPEAKERS) == ["Jo Malone"]


class TestEntityBoost:
    def test_memories_sharing_more_of_the_querys_entities_move_up(self) -> None:
        neither = make(0.30, content="We talked about the weather.")
        paris = make(0.25, content="Ann: I loved PARIS in spring.")
        both = make(0.22, content="Ann: Rome then Paris!")
        in_context = make(0.21, content="Yes!", context="Bob: Was Rome nice?")
        ranked, entities = boost_shared_entities(
            "Did we visit Paris or Rome?", [neither, paris, both, in_context], 0.5
        )
        assert entities == ["Paris", "Rome"]
        assert both.score == pytest.approx(0.22 * (1 + 0.5))  # both named: the whole boost
        assert paris.score == pytest.approx(0.25 * (1 + 0.5 / 2))  # any case, half of it
        assert in_context.score == pytest.approx(0.21 * (1 + 0.5 / 2))  # context counts
        assert neither.score == 0.30
        assert ranked == [both, paris, neither, in_context]
        assert both.stages["entities"].rank == 1

    def test_whole_words_only_and_speakers_left_out(self) -> None:
        parisian = make(0.3, content="A Parisian cafe", speaker="Caroline")
        plain = make(0.2, content="Caroline: a cafe in Paris", speaker="Caroline")
        ranked, entities = boost_shared_entities("Did Caroline like Paris?", [parisian, plain], 1.0)
        assert entities == ["Paris"]
        assert ranked == [plain, parisian] and parisian.score == 0.3

    def test_no_entity_no_change(self) -> None:
        a, b = make(0.2, content="x"), make(0.1, content="y")
        ranked, entities = boost_shared_entities("what did I eat?", [a, b], 1.0)
        assert entities == [] and ranked == [a, b] and "entities" not in a.stages


class TestSpeakerFreeQuery:
    def test_names_and_possessives_go_the_rest_stays(self) -> None:
        query = "What did Caroline's friend and melanie paint?"
        assert without_names(query, SPEAKERS) == "What did friend and paint?"

    def test_only_whole_names(self) -> None:
        assert without_names("Did Joanna meet Jo?", SPEAKERS) == "Did Joanna meet ?"

    def test_a_query_of_names_alone_is_kept(self) -> None:
        assert without_names("Caroline?", SPEAKERS) == "Caroline?"


def test_rocchio_moves_the_query_towards_the_mean_of_the_best_hits() -> None:
    query = np.array([1.0, 0.0, 0.0], dtype=np.float32)
    hits = [np.array([0.0, 1.0, 0.0]), np.array([0.0, 0.0, 1.0])]
    moved = rocchio(query, hits, 0.75)
    expected = np.array([1.0, 0.375, 0.375]) / np.linalg.norm([1.0, 0.375, 0.375])
    assert moved == pytest.approx(expected)
    assert rocchio(query, [], 0.75) is query


class TestTypedWeights:
    def test_a_query_naming_something_or_a_number_is_lexical(self) -> None:
        assert names_something("When did we fly to Lisbon?")
        assert names_something("what happened in 2022")
        assert not names_something("What books has Caroline read?", SPEAKERS)
        assert names_something("What books has Caroline read?")  # a name, unless a speaker

    def test_lexical_then_balanced_then_configured(self) -> None:
        assert leg_weights((0.7, 0.3), balanced=True, lexical=True) == (LEXICAL, "lexical query")
        assert leg_weights((0.7, 0.3), balanced=True, lexical=False) == (BALANCED, "balanced")
        assert leg_weights((0.7, 0.3), balanced=False, lexical=False) == (
            (0.7, 0.3),
            "configured",
        )
        assert LEXICAL[1] > LEXICAL[0] and sum(LEXICAL) == pytest.approx(1.0)


def test_a_name_that_is_the_querys_subject_stays() -> None:
    assert without_names("Tell me about Caroline", SPEAKERS) == "Tell me about Caroline"
    assert without_names("Who is Jo?", SPEAKERS) == "Who is Jo?"
    assert without_names("What does Jo paint?", SPEAKERS) == "What does paint?"
