"""The plan, the recipes and the loop that runs the steps, on plain values: no services."""

from __future__ import annotations

import dataclasses

import pytest

from app.config import Settings
from app.retrieval import disagreement, fusion, legs, ranking, relevance_steps
from app.retrieval.candidates import boost_scores
from app.retrieval.pipeline import STAGES
from app.retrieval.plan import Lever, StageSwitches
from app.retrieval.profiles import (
    LEVERS,
    RECIPES,
    TUNINGS,
    LeverOverrides,
    Levers,
    lever_changes,
    plan_search,
)
from app.retrieval.request import SearchRequest
from app.retrieval.steps import SearchContext, Step, run_steps
from app.retrieval.timing import StageTimer
from tests.retrieval.test_stages import make

SETTINGS = Settings(database_url="postgresql+asyncpg://u@localhost/db", rrf_k=10)
TRIED = Lever("tried", "a lever of this test")


def context_for(request: SearchRequest, plan_levers: dict[str, bool]) -> SearchContext:
    plan = dataclasses.replace(plan_search(request, SETTINGS.retrieval), levers=plan_levers)
    return SearchContext(request, plan, None, None, None, None, None, None)  # type: ignore[arg-type]


class TestPlan:
    def test_profile_overrides_and_rrf_constants_resolve_once(self) -> None:
        request = SearchRequest(
            "u",
            "q",
            5,
            profile="paper",
            levers={"neighbours": True},
            switches=StageSwitches(dedup=False),
            rrf_k=60,
        )
        plan = plan_search(request, SETTINGS.retrieval)
        assert plan.profile == "paper" and plan.rrf_k == 60
        assert plan.on(ranking.NEIGHBOURS) and not plan.on(ranking.SPEAKER)
        assert not plan.runs("dedup") and plan.runs("rerank")
        default = plan_search(
            SearchRequest("u", "q", 5, levers={"speaker": False}), SETTINGS.retrieval
        )
        assert default.profile == SETTINGS.retrieval.retrieval_profile and default.rrf_k == 10
        assert default.on(legs.SPEAKER_QUERY) and not default.on(ranking.SPEAKER)
        with pytest.raises(KeyError):
            default.on(TRIED)  # undeclared: an error, never a silent off

    def test_every_lever_is_a_field_of_the_structs_and_recipes_use_declared_ones(self) -> None:
        names = [lever.name for lever in LEVERS]
        assert len(set(names)) == len(names) == 24
        assert list(Levers.__struct_fields__) == names
        assert list(LeverOverrides.__struct_fields__) == names
        assert all(recipe <= set(LEVERS) for recipe in RECIPES.values())
        assert fusion.BALANCED_LEGS in RECIPES["default"] and not RECIPES["paper"]
        assert disagreement.NEWER_FIRST in RECIPES["default"]
        assert lever_changes(LeverOverrides(entities=True, speaker=False)) == {
            "entities": True,
            "speaker": False,
        }

    def test_each_steps_numbers_resolve_once_with_the_requests_over_the_settings(self) -> None:
        retrieval = SETTINGS.retrieval
        plain = plan_search(SearchRequest("u", "q", 5, profile="paper"), retrieval)
        assert set(plain.tuned) == {tuning.name for tuning in TUNINGS}
        assert plain.numbers(fusion.WEIGHTS) == fusion.Weights(
            (retrieval.rrf_weight_vector, retrieval.rrf_weight_bm25), "configured", None
        )
        floors = plain.numbers(relevance_steps.FLOORS)
        assert (floors.english, floors.multilingual) == (
            retrieval.min_relevance,
            retrieval.multilingual_min_relevance,
        )
        assert plain.numbers(legs.VECTOR_LEG).feedback_top == 0  # lever feedback off
        assert plain.numbers(legs.BM25_LEG).proximity_slop is None  # lever bm25_proximity off
        assert plain.numbers(ranking.SPEAKER_BOOST) == retrieval.speaker_boost

        asked = SearchRequest(
            "u",
            "q",
            5,
            profile="paper",
            levers={"balanced_legs": True, "typed_weights": True, "feedback": True},
            weight_bm25=0.9,
            min_relevance=0.4,
            switches=StageSwitches(rescore_768d=False),
        )
        plan = plan_search(asked, retrieval)
        # The request's BM25 weight wins over the balanced lever's and the lexical one's.
        assert plan.numbers(fusion.WEIGHTS) == fusion.Weights((0.5, 0.9), "balanced", (0.3, 0.9))
        assert fusion.plan_weights(plan, "what did we eat", []) == ((0.5, 0.9), "balanced")
        assert fusion.plan_weights(plan, "the trip to Oslo", []) == ((0.3, 0.9), "lexical query")
        floors = plan.numbers(relevance_steps.FLOORS)
        assert (floors.english, floors.multilingual) == (0.4, 0.4)
        vector = plan.numbers(legs.VECTOR_LEG)
        assert vector.feedback_top == retrieval.feedback_top and not vector.rescore_768d

    def test_the_explanation_stages_follow_the_steps(self) -> None:
        assert (
            *("256d", "768d", "feedback", "multilingual", "bm25", "rrf", "speaker", "entities"),
            *("neighbours", "entity_hop", "time_mention", "specificity", "temporal", "sessions"),
            "rerank",
            "relevance",
            "relevance_order",
            "relevance_guard",
            "language_order",
            "final",
        ) == STAGES


class TestLoop:
    async def test_the_loop_gates_times_and_reports_each_step(self) -> None:
        async def halve(value: float, _: SearchContext) -> tuple[float, str]:
            return value / 2, "halved"

        async def quietly(value: float, _: SearchContext) -> tuple[float, None]:
            return value + 1, None

        steps = (
            Step("lever_off", halve, timer="off_ms", lever=ranking.SPEAKER),
            Step("lever_on", halve, timer="on_ms", lever=TRIED),
            Step("switched_off", halve, timer="dedup_ms", switch="dedup"),
            Step("not_here", halve, timer="skip_ms", skip=lambda v, _: f"not for {v}"),
            Step("quiet", quietly),
        )
        request = SearchRequest("u", "q", 5, switches=StageSwitches(dedup=False))
        context = context_for(request, {"speaker": False, "tried": True})
        timer, status = StageTimer(), dict[str, str]()
        value = await run_steps(steps, 8.0, context, timer, status)
        assert value == 5.0  # halved once, then one added
        assert status == {
            "lever_on": "halved",
            "switched_off": "off",
            "not_here": "not for 4.0",
        }
        assert list(timer.durations) == ["on_ms"]

    async def test_a_step_serving_several_levers_runs_when_any_is_on(self) -> None:
        async def double(value: float, _: SearchContext) -> tuple[float, str]:
            return value * 2, "doubled"

        steps = (Step("shared", double, serves=(ranking.SPEAKER, TRIED)),)
        request = SearchRequest("u", "q", 5)
        for levers, expected, said in (
            ({"speaker": False, "tried": False}, 3.0, {}),  # no trace when none is on
            ({"speaker": False, "tried": True}, 6.0, {"shared": "doubled"}),
            ({"speaker": True, "tried": False}, 6.0, {"shared": "doubled"}),
        ):
            status: dict[str, str] = {}
            value = await run_steps(steps, 3.0, context_for(request, levers), StageTimer(), status)
            assert (value, status) == (expected, said)


def test_boosts_multiply_by_the_factor_earned_and_rank_at_the_stage() -> None:
    a, b, c = make(0.10), make(0.09), make(0.05)
    factors = {a.memory_id: 1.0, b.memory_id: 1.5, c.memory_id: 1.0}
    ranked = boost_scores([a, b, c], lambda x: factors[x.memory_id], "speaker")
    assert ranked == [b, a, c]
    assert b.score == pytest.approx(0.135) and a.score == 0.10 and c.score == 0.05
    assert [x.stages["speaker"].rank for x in ranked] == [1, 2, 3]
