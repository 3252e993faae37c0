"""The levers beyond the paper (context, speaker, neighbours, profiles) and the stage helpers,
on plain candidates: no services needed."""

from __future__ import annotations

import uuid
from datetime import UTC, date, datetime

import pytest

from app.memories.context import (
    Turn,
    context_after,
    contextual_text,
    link_session_turns,
    mentioned_time,
)
from app.memories.domain import MemoryDraft
from app.retrieval.candidates import Candidate
from app.retrieval.fusion import fuse_legs, fuse_scores, min_max
from app.retrieval.neighbours import links, spread_to_neighbours
from app.retrieval.profiles import PROFILES, LeverOverrides, Levers, resolve_levers
from app.retrieval.query_analysis import analyze_query
from app.retrieval.speakers import boost_named_speakers, named_speakers
from app.retrieval.time_mentions import boost_time_mentions, use_mentioned_times
from app.retrieval.timing import StageTimer
from app.retrieval.visibility import load_visible
from app.search_index.client import TextHit
from tests.retrieval.test_stages import AS_OF, make, row


class TestContext:
    def test_each_turn_gets_the_previous_turns_of_its_own_session(self) -> None:
        drafts = [
            MemoryDraft(
                "I went to the support group yesterday.", speaker="Caroline", session_id="a"
            ),
            MemoryDraft("Unrelated note", session_id="b"),
            MemoryDraft("How was it?", speaker="Melanie", session_id="a"),
            MemoryDraft("Really moving.", speaker="Caroline", session_id="a"),
            MemoryDraft("No session at all"),
        ]
        ids = [uuid.uuid4() for _ in drafts]
        link_session_turns(drafts, ids, {}, turns=2)
        assert drafts[0].context is None and drafts[0].follows_chain_id is None
        assert drafts[1].context is None  # first of session b
        assert drafts[2].context == "Caroline: I went to the support group yesterday."
        assert drafts[2].follows_chain_id == ids[0]
        assert drafts[3].context == (
            "Caroline: I went to the support group yesterday.\nMelanie: How was it?"
        )
        assert drafts[3].follows_chain_id == ids[2]
        assert drafts[4].context is None and drafts[4].follows_chain_id is None
        assert contextual_text(drafts[2]) == (
            "Caroline: I went to the support group yesterday.\nMelanie: How was it?"
        )
        assert contextual_text(drafts[0]) is None

    def test_a_batch_continues_the_stored_turn_and_keeps_a_given_context(self) -> None:
        stored = Turn(uuid.uuid4(), "Ann: first", "Bob: zero")
        drafts = [
            MemoryDraft("second", speaker="Bob", session_id="s"),
            MemoryDraft("third", speaker="Ann", session_id="s", context="given by the caller"),
        ]
        ids = [uuid.uuid4(), uuid.uuid4()]
        link_session_turns(drafts, ids, {"s": stored}, turns=1)
        assert drafts[0].follows_chain_id == stored.chain_id
        assert drafts[0].context == "Ann: first"  # one turn only
        assert drafts[1].context == "given by the caller"
        assert drafts[1].follows_chain_id == ids[0]

    def test_a_user_memory_never_carries_a_context_turns_text(self) -> None:
        secret = Turn(uuid.uuid4(), "my PIN is 4321", None, scope="CONTEXT")
        assert context_after(secret, 2, "USER") is None
        assert context_after(secret, 2, "CONTEXT") == "my PIN is 4321"
        drafts = [
            MemoryDraft("PIN noted", scope="USER", session_id="s"),
            MemoryDraft("and again", scope="CONTEXT", session_id="s"),
        ]
        link_session_turns(drafts, [uuid.uuid4(), uuid.uuid4()], {"s": secret}, turns=2)
        assert drafts[0].context is None
        assert drafts[0].follows_chain_id == secret.chain_id  # visibility is checked on read
        assert drafts[1].context == "PIN noted"

    def test_no_turns_means_links_without_context(self) -> None:
        drafts = [MemoryDraft("a", session_id="s"), MemoryDraft("b", session_id="s")]
        ids = [uuid.uuid4(), uuid.uuid4()]
        link_session_turns(drafts, ids, {}, turns=0)
        assert drafts[1].context is None and drafts[1].follows_chain_id == ids[0]


class TestSpeaker:
    def test_names_match_whole_words_in_any_case(self) -> None:
        speakers = {"Caroline", "Mel", "Jo"}
        assert named_speakers("what did caroline research?", speakers) == {"Caroline"}
        assert named_speakers("What does Melanie paint?", speakers) == set()  # not "Mel"
        assert named_speakers("Did Jo and Mel meet?", speakers) == {"Jo", "Mel"}

    def test_named_speakers_memories_move_up(self) -> None:
        melanie = make(0.10, speaker="Melanie")
        caroline = make(0.09, speaker="Caroline")
        nobody = make(0.095)
        ranked, named = boost_named_speakers(
            "What did Caroline research?", [melanie, nobody, caroline], 0.2
        )
        assert named == {"Caroline"}
        assert ranked == [caroline, melanie, nobody]
        assert caroline.score == pytest.approx(0.108)
        assert caroline.stages["speaker"].rank == 1

    def test_no_name_no_change(self) -> None:
        a, b = make(0.2, speaker="Ann"), make(0.1, speaker="Bob")
        ranked, named = boost_named_speakers("what is the weather", [a, b], 0.5)
        assert named == set() and ranked == [a, b] and a.score == 0.2 and "speaker" not in a.stages


class TestNeighbours:
    def test_adjacent_turns_share_a_decayed_score(self) -> None:
        before, hit_row, after, far = row(), row(), row(), row()
        hit_row.follows_chain_id = before.chain_id
        after.follows_chain_id = hit_row.chain_id
        hit = Candidate(memory_id=hit_row.id, score=0.10).load(hit_row)  # type: ignore[arg-type]
        other = make(0.06)
        also_after = Candidate(memory_id=after.id, score=0.01).load(after)  # type: ignore[arg-type]
        chains, follows = links([hit])
        assert chains == [hit_row.chain_id] and follows == [before.chain_id]
        ranked, joined = spread_to_neighbours(
            [hit, other, also_after],
            [before, after],
            decay=0.5,
            top_n=1,  # type: ignore[list-item]
        )
        assert joined == 1  # `before` was not a candidate; `after` was
        ids = [c.memory_id for c in ranked]
        assert ids == [hit_row.id, other.memory_id, before.id, after.id] or ids == [
            hit_row.id,
            other.memory_id,
            after.id,
            before.id,
        ]
        scores = {c.memory_id: c.score for c in ranked}
        assert scores[before.id] == pytest.approx(0.05)
        assert scores[after.id] == pytest.approx(0.05)  # max(own 0.01, share 0.05)
        assert scores[hit_row.id] == pytest.approx(0.10)
        assert far.id not in scores

    def test_only_the_head_lends_and_own_score_is_kept_when_higher(self) -> None:
        a_row, b_row = row(), row()
        b_row.follows_chain_id = a_row.chain_id
        a = Candidate(memory_id=a_row.id, score=0.05).load(a_row)  # type: ignore[arg-type]
        b = Candidate(memory_id=b_row.id, score=0.04).load(b_row)  # type: ignore[arg-type]
        top = make(0.2)
        ranked, _ = spread_to_neighbours([top, a, b], [], decay=0.9, top_n=1)
        assert {c.memory_id: c.score for c in ranked}[b_row.id] == pytest.approx(0.04)
        ranked, _ = spread_to_neighbours([a, b, top], [], decay=0.5, top_n=2)
        # a lends 0.025 to b (own 0.04 stays), b lends 0.02 to a (own 0.05 stays).
        assert [c.score for c in ranked] == pytest.approx([0.2, 0.05, 0.04])


class TestVisibility:
    def test_candidates_without_a_visible_row_are_dropped_in_order(self) -> None:
        # The rule itself is SQL (visible_in_session); the API tests cover it. Here: a
        # candidate whose row did not come back is dropped, the rest keep their order and rows.
        mine = row(user_id="u", is_current=True, scope="USER", session_id=None)
        here = row(user_id="u", is_current=True, scope="CONTEXT", session_id="s1")
        gone = uuid.uuid4()
        ranked = [Candidate(memory_id=i) for i in (here.id, gone, mine.id)]
        visible = load_visible(ranked, {m.id: m for m in (mine, here)})  # type: ignore[misc]
        assert [c.memory_id for c in visible] == [here.id, mine.id]
        assert visible[1].chain_id == mine.chain_id


class TestFusionOfLegs:
    def test_candidates_carry_both_ranks_and_the_rrf_score(self) -> None:
        a, b = make(0.9), make(0.8)
        c_id = uuid.uuid4()
        ranked = fuse_legs([a, b], [TextHit(b.memory_id, 3.0), TextHit(c_id, 2.0)], 10, 0.7, 0.3)
        assert [c.memory_id for c in ranked] == [b.memory_id, a.memory_id, c_id]
        assert ranked[0].score == pytest.approx(0.7 / 12 + 0.3 / 11)
        assert ranked[0].stages["bm25"].rank == 1 and ranked[2].stages["bm25"].rank == 2
        assert ranked[2].stages["rrf"].rank == 3

    def test_score_fusion_keeps_the_gaps_between_scores(self) -> None:
        a, b, c = make(0.80), make(0.79), make(0.40)  # cosines: a and b close, c far
        ranked = fuse_scores(
            [a, b, c], [TextHit(c.memory_id, 9.0), TextHit(b.memory_id, 1.0)], 0.7, 0.3
        )
        scores = {x.memory_id: x.score for x in ranked}
        assert scores[a.memory_id] == pytest.approx(0.7)
        assert scores[b.memory_id] == pytest.approx(0.7 * 0.975 + 0.0)
        assert scores[c.memory_id] == pytest.approx(0.3)
        assert [x.memory_id for x in ranked] == [a.memory_id, b.memory_id, c.memory_id]
        assert min_max([2.0, 2.0]) == [1.0, 1.0] and min_max([]) == []


class TestTimeMentions:
    def test_a_memory_names_a_time_relative_to_when_it_was_said(self) -> None:
        said = datetime(2023, 5, 8, 13, 0, tzinfo=UTC)
        yesterday = mentioned_time("I went to the support group yesterday.", said)
        assert yesterday is not None and yesterday.date() == date(2023, 5, 7)
        assert mentioned_time("The support group was lovely.", said) is None

    def test_when_questions_are_recognised(self) -> None:
        assert analyze_query("When did you move to Berlin?", AS_OF).asks_when
        assert analyze_query("In what year did she graduate?", AS_OF).asks_when
        assert not analyze_query("Whenever I cook, what do I use?", AS_OF).asks_when
        assert not analyze_query("What did I eat?", AS_OF).asks_when

    def test_memories_naming_a_time_move_up_and_keep_their_time(self) -> None:
        named = datetime(2023, 5, 7, tzinfo=UTC)
        plain, naming = make(0.10), make(0.09, mentioned_at=named)
        ranked, count = boost_time_mentions([plain, naming], 0.2)
        assert count == 1 and ranked == [naming, plain]
        assert naming.score == pytest.approx(0.108) and plain.score == 0.10
        use_mentioned_times(ranked)
        assert naming.when == named and plain.when == AS_OF


class TestProfiles:
    def test_paper_is_the_spec_and_overrides_apply_on_top(self) -> None:
        assert PROFILES["paper"] == Levers()
        assert PROFILES["default"] != Levers()
        assert resolve_levers("paper", LeverOverrides(neighbours=True)) == Levers(neighbours=True)
        default = resolve_levers("default", LeverOverrides(speaker=False))
        assert default.speaker is False
        assert default.context_vector == PROFILES["default"].context_vector


def test_stage_timer_records_each_stage_once_even_on_error() -> None:
    timer = StageTimer()
    with timer.stage("a_ms"):
        pass
    with pytest.raises(RuntimeError), timer.stage("b_ms"):
        raise RuntimeError("boom")
    assert set(timer.durations) == {"a_ms", "b_ms"}
    assert all(v >= 0 for v in timer.durations.values())
    assert timer.total_ms() >= max(timer.durations.values())
