"""Relevance and its floor (app/retrieval/relevance.py): the query's cosine to a memory on a
fixed 0-1 scale beside the fused score, and `min_relevance`, which leaves out what is below it
before the top_k cut. First the arithmetic on plain candidates, then through the real API."""

from __future__ import annotations

import pytest

from app.retrieval.candidates import Candidate
from app.retrieval.relevance import above_floor, on_scale, score_relevance, settle_head
from app.retrieval.relevance_steps import legs_agree_above
from tests.factories import search
from tests.retrieval.test_pipeline_api import _load
from tests.retrieval.test_stages import row


def candidate(cosine: float | None = None) -> Candidate:
    """A loaded candidate; with `cosine`, the vector leg's exact 768D score recorded."""
    memory = row()
    made = Candidate(memory_id=memory.id).load(memory)  # type: ignore[arg-type]
    if cosine is not None:
        made.record("768d", 1, cosine)
    return made


async def test_relevance_is_the_cosine_clipped_to_0_1_asked_only_where_not_known() -> None:
    known, close, opposite, unscored = candidate(0.91), candidate(), candidate(), candidate()
    asked: list[list] = []

    async def exact(ids: list) -> dict:
        asked.append(ids)
        cosines = {close.memory_id: 0.7071234, opposite.memory_id: -0.3}
        return {i: cosines[i] for i in ids if i in cosines}

    ranked = [known, close, opposite, unscored]
    await score_relevance(
        ranked, exact, lambda c: c.stages["768d"].score if "768d" in c.stages else None
    )

    assert [c.relevance for c in ranked] == [0.91, 0.7071, 0.0, None]
    # One query, for the candidates the vector leg had not scored; none once all are scored.
    assert asked == [[close.memory_id, opposite.memory_id, unscored.memory_id]]
    await score_relevance(ranked[:3], exact)
    assert len(asked) == 1


async def test_the_floor_keeps_the_order_and_leaves_out_what_is_below_it() -> None:
    low, high, middle = candidate(0.1), candidate(0.9), candidate(0.6)
    ranked = [low, high, middle]  # the fused order, not the relevance order

    async def nothing(ids: list) -> dict:
        return {}

    await score_relevance(ranked, nothing, lambda c: c.stages["768d"].score)

    assert above_floor(ranked, 0.0) == ranked
    assert above_floor(ranked, 0.5) == [high, middle]
    assert above_floor(ranked, 0.9) == [high]
    assert on_scale(1.00001) == 1.0 and on_scale(-0.2) == 0.0


FACTS = [
    {"content": "Ada lives in Porto, in a flat by the river."},
    {"content": "Ada is vegetarian and cooks lentil soup."},
    {"content": "Ada plays the cello in an amateur orchestra."},
]


async def test_each_result_has_a_relevance_that_does_not_depend_on_the_users_other_memories(
    client, opensearch, index_name, user_id, other_user_id
) -> None:
    await _load(client, opensearch, index_name, user_id, FACTS)
    await _load(
        client,
        opensearch,
        index_name,
        other_user_id,
        FACTS + [{"content": f"Ada walked to the river on day {i}."} for i in range(12)],
    )
    query = "Where does Ada live?"

    found = await search(client, user_id, query, top_k=3)
    relevance = {r["memory"]["content"]: r["relevance"] for r in found["results"]}
    assert set(relevance) == {f["content"] for f in FACTS}
    assert max(relevance, key=relevance.__getitem__) == FACTS[0]["content"]
    assert all(0.0 <= value <= 1.0 for value in relevance.values())
    for hit in found["results"]:
        assert hit["explanation"]["relevance"]["score"] == hit["relevance"]

    # The fused score of the same memory changes with the user's other memories; its
    # relevance to the same query does not.
    crowded = await search(client, other_user_id, query, top_k=15)
    crowded_relevance = {r["memory"]["content"]: r["relevance"] for r in crowded["results"]}
    for content, value in relevance.items():
        assert crowded_relevance[content] == pytest.approx(value, abs=1e-4)


async def test_min_relevance_leaves_out_filler_and_can_answer_nothing_relevant(
    client, opensearch, index_name, user_id
) -> None:
    await _load(client, opensearch, index_name, user_id, FACTS)
    query = "Where does Ada live?"
    everything = await search(client, user_id, query, top_k=3)
    values = sorted((r["relevance"] for r in everything["results"]), reverse=True)
    assert len(values) == 3 and values[0] > values[1]
    floor = round((values[0] + values[1]) / 2, 4)

    kept = await search(client, user_id, query, top_k=3, min_relevance=floor)
    assert [r["memory"]["content"] for r in kept["results"]] == [FACTS[0]["content"]]
    assert [r["rank"] for r in kept["results"]] == [1]
    assert kept["stages"]["relevance"] == f"floor {floor:g}: dropped 2"

    # A floor above every candidate: nothing relevant is remembered.
    none = await search(client, user_id, query, top_k=3, min_relevance=min(1.0, values[0] + 0.01))
    assert none["results"] == []


async def test_a_floor_outside_0_to_1_is_a_400_naming_the_field(client, user_id) -> None:
    for value in (-0.1, 1.5, "high"):
        response = await client.post(
            f"/v1/users/{user_id}/search", json={"query": "anything", "min_relevance": value}
        )
        assert response.status_code == 400, response.text
        assert response.headers["content-type"].startswith("application/problem+json")
        assert "min_relevance" in response.text


def settled(relevances: list[float | None], head: int = 3, pool: int = 10) -> list[int]:
    """The fused order's positions (0-based) after settle_head with margin 0.1."""
    made = [Candidate(memory_id=row().id, relevance=r) for r in relevances]
    order, _ = settle_head(made, head, pool, 0.1)
    return [made.index(c) for c in order]


def test_the_head_is_settled_by_relevance_beyond_the_margin_and_by_rank_within_it() -> None:
    # Within the margin of the best: the fused order stands.
    assert settled([0.30, 0.35, 0.38, 0.20]) == [0, 1, 2, 3]
    # "I moved to Osaka" (0.29) fused 3rd under two of 0.16: it comes first, the rest keep
    # their order after it.
    assert settled([0.16, 0.16, 0.29, 0.10]) == [2, 0, 1, 3]
    # Each place looks at what is left: the second place is settled after the first.
    assert settled([0.10, 0.40, 0.12, 0.30, 0.25]) == [1, 3, 4, 0, 2]
    # Only the head: places past it keep the fused order, and the pool bounds the search.
    assert settled([0.10, 0.11, 0.12, 0.13, 0.50], head=1, pool=4) == [0, 1, 2, 3, 4]
    assert settled([0.10, 0.11, 0.12, 0.13, 0.50], head=1, pool=5) == [4, 0, 1, 2, 3]
    # A candidate without a relevance is never passed over.
    assert settled([None, 0.10, 0.60]) == [0, 2, 1]


def test_no_head_result_stands_above_a_much_more_relevant_one_of_the_pool() -> None:
    import random

    rng = random.Random(3)
    for _ in range(200):
        relevances = [round(rng.random(), 3) for _ in range(rng.randint(1, 12))]
        made = [Candidate(memory_id=row().id, relevance=r) for r in relevances]
        order, moved = settle_head(made, 3, 10, 0.1)
        assert sorted(map(id, order)) == sorted(map(id, made))  # nothing lost or added
        assert {id(c) for c in order[:10]} == {id(c) for c in made[:10]}
        for above in range(min(3, len(order))):
            for below in range(above + 1, min(10, len(order))):
                assert order[below].relevance <= order[above].relevance + 0.1 + 1e-9
        assert moved <= 3


def guarded(
    relevances: list[float], bm25: list[int | None], vector: list[int | None] | None = None
) -> list[int]:
    """The fused order's positions (0-based) after the relevance guard (settle_head backed
    where both legs rank a candidate higher, margin 0.1, head 3); `bm25` and `vector` give
    each candidate's rank in that leg (None: the leg did not find it; `vector` unset: the
    vector leg ranks them as the fused order does)."""
    made = with_legs(relevances, bm25, vector)
    order, _ = settle_head(made, 3, 10, 0.1, legs_agree_above)
    return [made.index(c) for c in order]


def with_legs(
    relevances: list[float], bm25: list[int | None], vector: list[int | None] | None = None
) -> list[Candidate]:
    """Candidates with these relevances, each with its BM25 and vector leg ranks recorded
    (None: not found; `vector` unset: 1, 2, 3...)."""
    vector = vector if vector is not None else list(range(1, len(relevances) + 1))
    made = []
    for relevance, rank, vector_rank in zip(relevances, bm25, vector, strict=True):
        made.append(Candidate(memory_id=row().id, relevance=relevance))
        if rank is not None:
            made[-1].record("bm25", rank, None)
        if vector_rank is not None:
            made[-1].record("768d", vector_rank, None)
    return made


def test_the_guard_keeps_a_fused_order_that_both_legs_back_and_settles_the_rest() -> None:
    # Both legs rank the first above the more relevant second: the fused order stands.
    assert guarded([0.20, 0.45, 0.10], [1, 2, None]) == [0, 1, 2]
    # BM25 ranks the more relevant one higher, or found neither: the more relevant one comes
    # first, as relevance_order would put it.
    assert guarded([0.20, 0.45, 0.10], [2, 1, None]) == [1, 0, 2]
    assert guarded([0.20, 0.45, 0.10], [None, None, None]) == [1, 0, 2]
    # A candidate a leg found ranks above one it did not find.
    assert guarded([0.20, 0.45, 0.10], [5, None, None]) == [0, 1, 2]
    assert guarded([0.20, 0.45, 0.10], [1, 2, 3], [1, None, 2]) == [0, 1, 2]
    # BM25 alone is not enough: where the vector leg sides with the cosine, the cosine wins.
    assert guarded([0.20, 0.45, 0.10], [1, 2, None], [2, 1, 3]) == [1, 0, 2]
    assert guarded([0.20, 0.45, 0.10], [1, 2, None], [None, 1, 2]) == [1, 0, 2]
    # The vector leg's last pass counts: the exact 768D rank, else the 256D shortlist's.
    shortlisted = with_legs([0.20, 0.45], [1, 2], [None, None])
    shortlisted[0].record("256d", 1, None)
    shortlisted[1].record("256d", 2, None)
    assert settle_head(shortlisted, 3, 10, 0.1, legs_agree_above)[0] == shortlisted
    # Within the margin the fused order stands whatever the legs say.
    assert guarded([0.40, 0.45, 0.10], [None, 1, None], [3, 1, 2]) == [0, 1, 2]


def test_every_inversion_the_guard_leaves_in_the_head_is_backed_by_both_legs() -> None:
    import random

    rng = random.Random(5)
    for _ in range(300):
        size = rng.randint(1, 12)
        relevances = [round(rng.random(), 3) for _ in range(size)]
        ranks = rng.sample(range(1, 20), size)
        bm25 = [rank if rng.random() < 0.7 else None for rank in ranks]
        vector = [rank if rng.random() < 0.9 else None for rank in rng.sample(range(1, 20), size)]
        made = with_legs(relevances, bm25, vector)
        order, moved = settle_head(made, 3, 10, 0.1, legs_agree_above)
        assert sorted(map(id, order)) == sorted(map(id, made))
        assert {id(c) for c in order[:10]} == {id(c) for c in made[:10]}
        for above in range(min(3, len(order))):
            for below in range(above + 1, min(10, len(order))):
                if order[below].relevance > order[above].relevance + 0.1 + 1e-9:
                    assert legs_agree_above(order[above], order[below])
                    assert "bm25" in order[above].stages  # BM25 found what stands above
        assert moved <= 3
