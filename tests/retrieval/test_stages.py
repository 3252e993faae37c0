"""Stage arithmetic and edge cases, on plain candidates (no services needed)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest

from app.retrieval.candidates import Candidate, rank_by_score
from app.retrieval.dedup import dedup_head, drop_near_duplicates
from app.retrieval.history import with_history
from app.retrieval.query_analysis import analyze_query
from app.retrieval.temporal import apply_temporal_boost, temporal_score
from app.time_expressions import TimeWindow

AS_OF = datetime(2023, 5, 8, 10, 0, tzinfo=UTC)


def row(**fields: object) -> SimpleNamespace:
    """A stand-in for a memory row: the fields the stages after loading read."""
    defaults: dict[str, object] = {
        "id": uuid.uuid4(),
        "event_time": None,
        "created_at": AS_OF,
        "chain_id": uuid.uuid4(),
        "follows_chain_id": None,
        "speaker": None,
        "mentioned_at": None,
        "content": "",
        "context": None,
    }
    return SimpleNamespace(**{**defaults, **fields})


def make(
    score: float, event_time: datetime | None = None, created_at: datetime = AS_OF, **fields: object
) -> Candidate:
    memory = row(event_time=event_time, created_at=created_at, **fields)
    return Candidate(memory_id=memory.id, score=score).load(memory)  # type: ignore[arg-type]


def window(start: datetime, days: int) -> TimeWindow:
    return TimeWindow(start=start, end=start + timedelta(days=days), text="x", granularity="range")


class TestTemporal:
    def test_score_formula_centre_and_floor(self) -> None:
        may = window(datetime(2023, 5, 1, tzinfo=UTC), 10)  # centre 6 May 00:00, 10 days
        assert temporal_score(datetime(2023, 5, 6, tzinfo=UTC), may, 0.1) == pytest.approx(1.0)
        assert temporal_score(datetime(2023, 5, 1, tzinfo=UTC), may, 0.1) == pytest.approx(0.5)
        assert temporal_score(datetime(2023, 5, 14, tzinfo=UTC), may, 0.1) == pytest.approx(0.2)
        assert temporal_score(datetime(2022, 1, 1, tzinfo=UTC), may, 0.1) == pytest.approx(0.1)

    def test_one_day_window_is_at_least_a_day_wide(self) -> None:
        day = window(datetime(2023, 5, 7, tzinfo=UTC), 1)
        noon = datetime(2023, 5, 7, 12, tzinfo=UTC)
        assert temporal_score(noon, day, 0.1) == pytest.approx(1.0)
        assert temporal_score(noon + timedelta(hours=12), day, 0.1) == pytest.approx(0.5)

    def test_boost_normalises_fused_scores_and_reorders(self) -> None:
        may = window(datetime(2023, 5, 1, tzinfo=UTC), 10)
        relevant_but_old = make(0.09, event_time=datetime(2021, 1, 1, tzinfo=UTC))
        less_relevant_in_window = make(0.06, event_time=datetime(2023, 5, 6, tzinfo=UTC))
        ranked = apply_temporal_boost(
            [relevant_but_old, less_relevant_in_window], may, 0.6, 0.4, 0.1
        )
        assert ranked == [less_relevant_in_window, relevant_but_old]
        assert less_relevant_in_window.score == pytest.approx(0.6 * (0.06 / 0.09) + 0.4 * 1.0)
        assert relevant_but_old.score == pytest.approx(0.6 * 1.0 + 0.4 * 0.1)
        assert less_relevant_in_window.stages["temporal"].rank == 1

    def test_missing_event_time_falls_back_to_created_at(self) -> None:
        may = window(datetime(2023, 5, 1, tzinfo=UTC), 10)
        learned_in_window = make(0.05, event_time=None, created_at=datetime(2023, 5, 6, tzinfo=UTC))
        (only,) = apply_temporal_boost([learned_in_window], may, 0.6, 0.4, 0.1)
        assert only.score == pytest.approx(0.6 + 0.4)

    def test_empty_list(self) -> None:
        assert apply_temporal_boost([], window(AS_OF, 1), 0.6, 0.4, 0.1) == []


class TestDedup:
    def test_drops_only_lower_ranked_duplicates(self) -> None:
        a, b, c, d = (make(s) for s in (0.4, 0.3, 0.2, 0.1))
        kept, dropped = drop_near_duplicates([a, b, c, d], [(c.memory_id, a.memory_id)])
        assert kept == [a, b, d]
        assert dropped == [c]

    def test_similarity_to_a_dropped_one_does_not_drop(self) -> None:
        a, b, c = make(0.3), make(0.2), make(0.1)
        # b ~ a (b dropped); c ~ b only: c stays, since b is not shown.
        kept, dropped = drop_near_duplicates(
            [a, b, c], [(a.memory_id, b.memory_id), (b.memory_id, c.memory_id)]
        )
        assert kept == [a, c]
        assert dropped == [b]

    async def test_window_widens_until_top_k_survive(self) -> None:
        items = [make(1.0 - i / 100) for i in range(10)]
        first = items[0].memory_id
        windows: list[int] = []

        async def pairs(ids):  # everything in the list duplicates the first item
            windows.append(len(ids))
            return [(first, other) for other in ids if other != first]

        ranked, dropped = await dedup_head(items, top_k=3, head_size=2, similar_pairs=pairs)
        # 2 -> 1 kept; 4 -> 1 kept; 8 -> 1 kept; 16 covers all 10 -> stop with 1 kept.
        assert windows == [2, 4, 8, 10]
        assert ranked == [items[0]]
        assert len(dropped) == 9

    async def test_window_not_widened_when_enough_survive(self) -> None:
        items = [make(1.0 - i / 100) for i in range(6)]
        calls: list[int] = []

        async def pairs(ids):
            calls.append(len(ids))
            return [(ids[0], ids[1])]

        ranked, dropped = await dedup_head(items, top_k=2, head_size=4, similar_pairs=pairs)
        assert calls == [4]
        assert ranked == [items[0], *items[2:]]
        assert dropped == [items[1]]

    def test_no_pairs_keeps_everything_in_order(self) -> None:
        items = [make(0.3), make(0.2)]
        assert drop_near_duplicates(items, []) == (items, [])


class TestRanking:
    def test_ties_keep_previous_order(self) -> None:
        a, b, c = make(0.5), make(0.5), make(0.7)
        assert rank_by_score([a, b, c], "rrf") == [c, a, b]
        assert [x.stages["rrf"].rank for x in (c, a, b)] == [1, 2, 3]


class TestHistory:
    def test_earlier_versions_follow_their_hit(self) -> None:
        hit, other = make(0.9), make(0.8)
        old1, old2 = row(), row()
        earlier = {hit.memory.chain_id: [old1, old2]}
        combined = with_history([hit, other], earlier, max_versions=1)
        assert [c.memory_id for c in combined] == [hit.memory_id, old1.id, other.memory_id]
        assert combined[1].history_of == hit.memory_id


class TestQueryAnalysis:
    @pytest.mark.parametrize(
        ("query", "history"),
        [
            ("Where did I use to live?", True),
            ("What did I say about my job?", True),
            ("Do I still eat meat or not anymore?", True),
            ("Where do I live?", False),
            ("What is my favourite food?", False),
        ],
    )
    def test_history_intent(self, query: str, history: bool) -> None:
        assert analyze_query(query, AS_OF).history is history

    def test_temporal_intent_resolves_against_as_of(self) -> None:
        analysis = analyze_query("What did I do last week?", AS_OF)
        assert analysis.temporal
        assert analysis.window is not None
        assert analysis.window.start == datetime(2023, 5, 1, tzinfo=UTC)
        assert analysis.window.end == datetime(2023, 5, 8, tzinfo=UTC)
        explained = analysis.explanation()
        assert explained["time_window"]["granularity"] == "week"
        assert explained["as_of"] == AS_OF.isoformat()

    def test_no_time_expression(self) -> None:
        analysis = analyze_query("What is my dog's name?", AS_OF)
        assert not analysis.temporal
        assert analysis.explanation()["time_window"] is None
