"""Multi-part questions, session scoring and event ordering on plain candidates: the splitting
(from syntax alone), the fusion of the parts' rankings, the places each part keeps, and the
sessions' lift and spread. No services needed."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from app.retrieval.candidates import Candidate
from app.retrieval.parts import (
    EVENT_ORDER,
    QUERY_PARTS,
    fuse_parts,
    interleave_parts,
    part_texts,
    parts_to_search,
)
from app.retrieval.plan import RetrievalPlan
from app.retrieval.profiles import plan_search
from app.retrieval.query_analysis import analyze_query
from app.retrieval.query_parts import MAX_PARTS, split_query
from app.retrieval.request import SearchRequest
from app.retrieval.sessions import lift_sessions, score_sessions, session_of
from tests.retrieval.test_plan import SETTINGS
from tests.retrieval.test_stages import AS_OF, make


class TestSplitting:
    @pytest.mark.parametrize(
        ("query", "parts", "kind"),
        [
            (
                "How long was it between the move to Lyon and the first day at the bakery?",
                ("the move to Lyon", "the first day at the bakery"),
                "between",
            ),
            (
                "Did she adopt the cat before she started the pottery class?",
                ("Did she adopt the cat", "she started the pottery class"),
                "temporal",
            ),
            (
                "How many weeks after the wedding did they fly to Lisbon?",
                ("the wedding", "they fly to Lisbon"),
                "temporal",
            ),
            (
                "Which came first, the marathon or the knee surgery?",
                ("the marathon", "the knee surgery"),
                "alternative",
            ),
            (
                "Is he better at chess than at go?",
                ("Is he better at chess", "Is he better at go"),
                "comparison",
            ),
            (
                "Where did she study law and where did she work afterwards?",
                ("Where did she study law", "where did she work afterwards"),
                "coordination",
            ),
            # A short conjunct borrows the words before the other's last one.
            ("Does he play violin and piano?", ("Does he play violin", "Does he play piano"), None),
        ],
    )
    def test_parts_come_from_the_connectives(
        self, query: str, parts: tuple[str, ...], kind: str | None
    ) -> None:
        found = split_query(query)
        assert found.parts == parts
        if kind is not None:
            assert found.kind == kind

    @pytest.mark.parametrize(
        "query",
        [
            "What is her favourite colour?",
            "What did and discuss?",  # names gone: the conjuncts say nothing
            "Where did Tom go?",
        ],
    )
    def test_no_parts_without_two_conjuncts_that_say_something(self, query: str) -> None:
        found = split_query(query)
        assert found.parts == () and found.kind is None

    def test_at_most_three_parts(self) -> None:
        found = split_query("Did she visit Rome and Paris and Oslo and Bergen and Turku?")
        assert len(found.parts) == MAX_PARTS == 3

    @pytest.mark.parametrize(
        ("query", "order", "listing"),
        [
            ("Which did he do first, the hike or the swim?", True, False),
            ("How many days passed between the party and the exam?", True, False),
            ("What did she do after the concert?", True, False),
            ("What books has she read?", False, True),
            ("What kinds of art does he make?", False, True),
            ("What does she do for work?", False, False),  # "does" is no plural noun
            ("What is his address?", False, False),
        ],
    )
    def test_order_and_list_questions(self, query: str, order: bool, listing: bool) -> None:
        found = split_query(query)
        assert (found.asks_order, found.asks_list) == (order, listing)

    def test_the_analysis_explains_the_parts(self) -> None:
        explained = analyze_query("Did he sell the car before or after the move?", AS_OF)
        assert explained.explanation()["parts"] == list(explained.parts.parts)
        assert explained.explanation()["asks_order"] is True

    def test_speaker_names_leave_the_parts_and_a_name_alone_is_no_part(self) -> None:
        speakers = frozenset({"Ann", "Bob"})
        assert part_texts(["Ann's trip to Oslo", "Bob"], speakers) == ["trip to Oslo"]
        assert part_texts(["trip", "hike"], frozenset()) == ["trip", "hike"]


class TestWhichPartsAreSearched:
    def plan(self, **levers: bool) -> RetrievalPlan:
        request = SearchRequest(user_id="u", query="q", top_k=5, profile="paper", levers=levers)
        return plan_search(request, SETTINGS.retrieval)

    def test_query_parts_takes_all_event_order_only_time_ordering(self) -> None:
        listing = split_query("Does he play violin and piano?")
        ordering = split_query("Which came first, the marathon or the knee surgery?")
        assert parts_to_search(self.plan(), ordering) == ()
        on = self.plan(**{QUERY_PARTS.name: True})
        assert parts_to_search(on, listing) == listing.parts
        order = self.plan(**{EVENT_ORDER.name: True})
        assert parts_to_search(order, listing) == ()
        assert parts_to_search(order, ordering) == ordering.parts


def candidates(*scores: float) -> list[Candidate]:
    return [make(score) for score in scores]


class TestPartFusion:
    def test_parts_join_the_whole_ranking_and_keep_their_ranks(self) -> None:
        whole = candidates(0.9, 0.8, 0.7)
        only_part = make(0.5)
        # Part 1 found the whole's third first, and a memory the whole did not find.
        part = [Candidate(whole[2].memory_id, score=0.4), Candidate(only_part.memory_id, 0.3)]
        fused = fuse_parts(whole, [part], k=10)
        ids = [c.memory_id for c in fused]
        assert ids[0] == whole[2].memory_id  # in both lists
        assert only_part.memory_id in ids
        newcomer = next(c for c in fused if c.memory_id == only_part.memory_id)
        assert newcomer.memory is None and "768d" not in newcomer.stages  # measured anew
        assert newcomer.stages["part 1"].rank == 2
        assert [c.stages["parts"].rank for c in fused] == list(range(1, len(fused) + 1))

    def test_each_part_has_places_at_the_head(self) -> None:
        ranked = candidates(*(1.0 - i / 100 for i in range(12)))
        # Part 1's best is 11th overall, part 2's best 12th: the whole ranking would cut both.
        ranked[10].record("part 1", 1, 0.1)
        ranked[9].record("part 1", 2, 0.1)
        ranked[11].record("part 2", 1, 0.1)
        head = interleave_parts(ranked, parts=2, rounds=2)
        assert [c.memory_id for c in head[:6]] == [
            ranked[0].memory_id,
            ranked[10].memory_id,
            ranked[11].memory_id,
            ranked[1].memory_id,
            ranked[9].memory_id,
            ranked[2].memory_id,  # part 2 has no second: the round goes on
        ]
        assert sorted(c.memory_id for c in head) == sorted(c.memory_id for c in ranked)
        assert interleave_parts(ranked, parts=2, rounds=0) == ranked


def in_session(score: float, session: str | None, day: int | None = None) -> Candidate:
    when = datetime(2023, 5, day, 12, tzinfo=UTC) if day else None
    return make(score, event_time=when, session_id=session)


class TestSessions:
    def test_a_session_is_the_memorys_own_else_its_day_else_none(self) -> None:
        assert session_of(in_session(1.0, "s1", day=3)) == "session:s1"
        assert session_of(in_session(1.0, None, day=3)) == "day:2023-05-03"
        assert session_of(in_session(1.0, None)) is None

    def test_sessions_are_scored_by_their_best_three(self) -> None:
        ranked = [in_session(s, "a") for s in (0.5, 0.4, 0.3, 0.2)] + [in_session(0.45, "b")]
        assert score_sessions(ranked, top_n=10) == pytest.approx(
            {"session:a": 1.2, "session:b": 0.45}
        )
        assert score_sessions(ranked, top_n=1) == pytest.approx({"session:a": 0.5})

    def test_strong_sessions_lift_and_one_session_cannot_take_every_place(self) -> None:
        one = [in_session(1.0 - i / 100, "long") for i in range(5)]  # 1.00 .. 0.96
        other = in_session(0.95, "short")
        stray = in_session(0.955, None)
        ranked, held = lift_sessions([*one, stray, other], top_n=10, boost=0.0, decay=0.8)
        assert held == 2
        order = [c.memory_id for c in ranked]
        # Spread: the other session's best passes the long one's second to fifth.
        assert order[:3] == [one[0].memory_id, stray.memory_id, other.memory_id]
        # Lift without spread: the strong session's memories pass the stray.
        lifted, _ = lift_sessions(
            [in_session(0.5, "x"), in_session(0.5, "x"), in_session(0.52, None)], 10, 0.5, 1.0
        )
        assert lifted[-1].memory is not None and lifted[-1].memory.session_id is None

    def test_no_sessions_no_change(self) -> None:
        ranked = [make(0.3, session_id=None), make(0.2, session_id=None)]
        after, held = lift_sessions(list(ranked), top_n=10, boost=1.0, decay=0.5)
        assert held == 0 and [c.score for c in after] == [0.3, 0.2]
