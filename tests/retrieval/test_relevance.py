"""Relevance and its floor (app/retrieval/relevance.py): the query's cosine to a memory on a
fixed 0-1 scale beside the fused score, and `min_relevance`, which leaves out what is below it
before the top_k cut. First the arithmetic on plain candidates, then through the real API."""

from __future__ import annotations

import pytest

from app.retrieval.candidates import Candidate
from app.retrieval.relevance import above_floor, on_scale, score_relevance
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
