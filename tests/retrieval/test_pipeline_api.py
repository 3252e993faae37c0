"""The 8-stage pipeline through the real API: explanations, switches, stages, logs, metrics."""

from __future__ import annotations

import json
import uuid

import pytest

from tests.conftest import wait_until
from tests.factories import indexed_document, search, stage_rank

AS_OF = "2023-05-08T10:00:00Z"


async def _load(client, opensearch, index_name, user_id, items: list[dict]) -> list[dict]:
    response = await client.post(f"/v1/users/{user_id}/memories/batch", json={"memories": items})
    assert response.status_code == 201, response.text
    created = response.json()["items"]

    async def indexed():
        return all([await indexed_document(opensearch, index_name, m["id"]) for m in created])

    await wait_until(indexed)
    await opensearch.indices.refresh(index=index_name)
    return created


async def test_explanation_is_consistent_with_the_final_order(
    client, opensearch, index_name, user_id
) -> None:
    await _load(
        client,
        opensearch,
        index_name,
        user_id,
        [{"content": f"I went hiking near lake number {i} with friends"} for i in range(8)]
        + [{"content": "My cat is called Miso"}, {"content": "I work as a nurse in Lisbon"}],
    )
    found = await search(client, user_id, "hiking with friends at the lake", top_k=6)
    results = found["results"]
    assert len(results) == 6
    finals = [r["explanation"]["final"] for r in results]
    assert [f["rank"] for f in finals] == [1, 2, 3, 4, 5, 6]
    assert [r["rank"] for r in results] == [1, 2, 3, 4, 5, 6]
    scores = [f["score"] for f in finals]
    assert scores == sorted(scores, reverse=True)
    assert [r["score"] for r in results] == scores
    for r in results:
        explanation = r["explanation"]
        assert {"256d", "768d", "rrf", "final"} <= set(explanation)
        # Without temporal intent or a cross-encoder, the final score is the RRF score as
        # the specificity lever (on in `default`) weighed it.
        assert explanation["final"]["score"] == explanation["specificity"]["score"]
        assert found["stages"]["specificity"].startswith("10 memories' words, weight ")
    analysis = found["query_analysis"]
    assert analysis["temporal_intent"] is False
    assert analysis["history_intent"] is False
    assert found["stages"]["temporal"] == "no time window in query"
    assert found["stages"]["rerank"] == "skipped: no cross-encoder configured"
    assert set(found["stage_durations_ms"]) >= {
        "query_analysis_ms",
        "query_embedding_ms",
        "vector_256d_ms",
        "vector_768d_ms",
        "bm25_ms",
        "rrf_fusion_ms",
        "dedup_ms",
    }


async def test_switches_turn_stages_off(client, opensearch, index_name, user_id) -> None:
    await _load(
        client,
        opensearch,
        index_name,
        user_id,
        [
            {"content": "I play the bassoon in an orchestra"},
            {"content": "I enjoy gardening"},
            {"content": "The orchestra rehearses on Monday evenings"},
            {"content": "My bassoon teacher lives next door"},
            {"content": "We watched an orchestra play outdoors"},
        ],
    )
    # The paper's stages alone: the order is BM25's.
    bm25_only = await search(client, user_id, "bassoon", stages={"vector": False}, profile="paper")
    assert all("256d" not in r["explanation"] for r in bm25_only["results"])
    assert stage_rank(bm25_only["results"][0], "bm25") == 1
    assert "query_embedding_ms" not in bm25_only["stage_durations_ms"]
    # No query vector, no relevance: the floor cannot apply and says so.
    assert all(r["relevance"] is None for r in bm25_only["results"])
    assert bm25_only["stages"]["relevance"].startswith("skipped: the vector stage is off")
    floored = await client.post(
        f"/v1/users/{user_id}/search",
        json={"query": "bassoon", "stages": {"vector": False}, "min_relevance": 0.2},
    )
    assert floored.status_code == 400 and floored.json()["field"] == "min_relevance"

    vector_only = await search(client, user_id, "bassoon", stages={"bm25": False})
    assert vector_only["stages"]["bm25"] == "off"
    assert all("bm25" not in r["explanation"] for r in vector_only["results"])

    coarse_only = await search(client, user_id, "bassoon", stages={"rescore_768d": False})
    assert all("768d" not in r["explanation"] for r in coarse_only["results"])
    assert "vector_768d_ms" not in coarse_only["stage_durations_ms"]

    # RRF weights per request: all weight on BM25 gives BM25's order (the paper's stages).
    text_order = await search(
        client,
        user_id,
        "bassoon orchestra",
        rrf={"weight_vector": 0, "weight_bm25": 1},
        profile="paper",
    )
    bm25_ranked = [r for r in text_order["results"] if "bm25" in r["explanation"]]
    assert len(bm25_ranked) >= 3  # four memories share a word with the query
    # BM25's hits come first, in BM25's order; what only the vector leg found scores nothing.
    head = text_order["results"][: len(bm25_ranked)]
    assert [stage_rank(r, "bm25") for r in head] == list(range(1, len(bm25_ranked) + 1))


async def test_temporal_boost_prefers_the_queried_window(
    client, opensearch, index_name, user_id
) -> None:
    created = await _load(
        client,
        opensearch,
        index_name,
        user_id,
        [
            {"content": "I went to a pottery class", "event_time": "2022-03-02T10:00:00Z"},
            {"content": "I went to a pottery workshop", "event_time": "2023-05-03T10:00:00Z"},
        ],
    )
    recent = created[1]["id"]
    found = await search(client, user_id, "What pottery did I do last week?", as_of=AS_OF)
    assert found["stages"]["temporal"] == "applied"
    window = found["query_analysis"]["time_window"]
    assert window["start"].startswith("2023-05-01")
    assert window["end"].startswith("2023-05-08")
    top = found["results"][0]
    assert top["memory"]["id"] == recent
    assert top["explanation"]["temporal"]["rank"] == 1
    assert "temporal_boost_ms" in found["stage_durations_ms"]
    off = await search(
        client, user_id, "What pottery did I do last week?", as_of=AS_OF, stages={"temporal": False}
    )
    assert off["stages"]["temporal"] == "off"
    assert all("temporal" not in r["explanation"] for r in off["results"])


async def test_near_duplicates_are_dropped(client, opensearch, index_name, user_id) -> None:
    first, second, _ = await _load(
        client,
        opensearch,
        index_name,
        user_id,
        [
            {"content": "I am allergic to shellfish"},
            {"content": "I am allergic to shellfish"},
            {"content": "I enjoy long walks"},
        ],
    )
    found = await search(client, user_id, "shellfish allergy")
    ids = [r["memory"]["id"] for r in found["results"]]
    assert len({first["id"], second["id"]} & set(ids)) == 1
    assert found["stages"]["dedup"] == "dropped 1"
    both = await search(client, user_id, "shellfish allergy", stages={"dedup": False})
    assert {first["id"], second["id"]} <= {r["memory"]["id"] for r in both["results"]}


async def test_history_query_returns_superseded_versions(
    client, opensearch, index_name, user_id
) -> None:
    (memory,) = await _load(
        client, opensearch, index_name, user_id, [{"content": "I live in Tokyo"}]
    )
    second = (
        await client.patch(
            f"/v1/users/{user_id}/memories/{memory['id']}", json={"content": "I live in Osaka"}
        )
    ).json()
    third = (
        await client.patch(
            f"/v1/users/{user_id}/memories/{second['id']}", json={"content": "I live in Kyoto"}
        )
    ).json()

    async def current_indexed():
        document = await indexed_document(opensearch, index_name, third["version_id"])
        return document and document["_source"]["is_current"]

    await wait_until(current_indexed)
    plain = await search(client, user_id, "Where do I live?")
    assert [r["memory"]["id"] for r in plain["results"]] == [third["id"]]

    found = await search(client, user_id, "Where did I use to live?")
    assert found["query_analysis"]["history_intent"] is True
    assert found["stages"]["history"] == "applied"
    results = found["results"]
    assert [r["memory"]["content"] for r in results] == [
        "I live in Kyoto",
        "I live in Osaka",
        "I live in Tokyo",
    ]
    assert [r["superseded"] for r in results] == [False, True, True]
    # Every version carries the memory's id, which an earlier one names as `history_of`.
    assert [r["memory"]["id"] for r in results] == [memory["id"]] * 3
    assert [r["history_of"] for r in results] == [None, memory["id"], memory["id"]]
    assert [r["memory"]["version_id"] for r in results] == [
        third["version_id"],
        second["version_id"],
        memory["version_id"],
    ]
    assert all(r["memory"]["superseded_at"] for r in results[1:])
    assert results[1]["memory"]["superseded_at"] == results[0]["memory"]["created_at"]
    assert results[1]["explanation"] is None  # history entries were not ranked


async def test_log_line_and_metrics(api, client, opensearch, index_name, user_id) -> None:
    await _load(client, opensearch, index_name, user_id, [{"content": "I speak Basque"}])
    request_id = uuid.uuid4().hex
    # The API process's own log: the subprocess API answers this search.
    async with api.client() as http:
        response = await http.post(
            f"/v1/users/{user_id}/search",
            json={"query": "languages"},
            headers={"X-Request-ID": request_id},
        )
        metrics = (await http.get("/metrics")).text
    assert response.status_code == 200
    lines = [json.loads(line) for line in api.log_text().splitlines() if request_id in line]
    assert len(lines) == 1
    line = lines[0]
    assert line["event"] == "memory_retrieval"
    assert line["user_id"] == user_id
    assert line["results_final"] == 1
    assert line["temporal_query"] is False
    assert {
        "query_analysis_ms",
        "vector_256d_ms",
        "vector_768d_ms",
        "bm25_ms",
        "rrf_fusion_ms",
    } <= set(line["stage_durations"])
    assert line["duration_ms"] >= max(line["stage_durations"].values())

    assert 'cognis_retrieval_stage_seconds_count{stage="vector_256d"}' in metrics
    assert "cognis_retrieval_seconds_count" in metrics


async def test_cross_encoder_reorders_the_head(
    api_with_cross_encoder, tiny_cross_encoder, client, opensearch, index_name, user_id
) -> None:
    await _load(
        client,
        opensearch,
        index_name,
        user_id,
        [{"content": f"Note {i}: I bought {i} apples at the market"} for i in range(8)],
    )
    async with api_with_cross_encoder.client() as ce:
        found = await search(ce, user_id, "apples at the market", top_k=8)
    assert found["stages"]["rerank"] == "applied"
    assert "cross_encoder_ms" in found["stage_durations_ms"]
    results = found["results"]
    head = [r for r in results if "rerank" in r["explanation"]]
    assert len(head) == 5  # COGNIS_RERANK_TOP_N
    assert results[:5] == head  # the re-ranked head comes first
    # The head is the RRF top 5, scored by the configured model and put in its order: score the
    # same pairs with the same model here and compare.
    from sentence_transformers import CrossEncoder

    assert sorted(r["explanation"]["rrf"]["rank"] for r in head) == [1, 2, 3, 4, 5]
    expected = CrossEncoder(str(tiny_cross_encoder)).predict(
        [("apples at the market", r["memory"]["content"]) for r in head]
    )
    for result, score in zip(head, expected, strict=True):
        assert result["explanation"]["rerank"]["score"] == pytest.approx(float(score), abs=1e-4)
    assert list(expected) == sorted(expected, reverse=True)
    finals = [r["explanation"]["final"]["score"] for r in results]
    assert finals == sorted(finals, reverse=True)


async def test_every_stage_stays_inside_the_user(
    client, opensearch, index_name, user_id, other_user_id
) -> None:
    """History, temporal, dedup and both legs: nothing of user A reaches user B."""
    (mine,) = await _load(
        client,
        opensearch,
        index_name,
        user_id,
        [{"content": "I used to live in Reykjavik", "event_time": "2023-05-03T10:00:00Z"}],
    )
    await client.patch(
        f"/v1/users/{user_id}/memories/{mine['id']}", json={"content": "I live in Oslo"}
    )
    await _load(
        client,
        opensearch,
        index_name,
        other_user_id,
        [{"content": "I used to live in Reykjavik", "event_time": "2023-05-03T10:00:00Z"}],
    )
    for query in ("Where did I use to live before?", "Where did I live last week?", "Reykjavik"):
        found = await search(client, other_user_id, query, as_of=AS_OF, top_k=50)
        assert found["results"], query
        assert {r["memory"]["user_id"] for r in found["results"]} == {other_user_id}, query
        assert mine["id"] not in {r["memory"]["id"] for r in found["results"]}


async def test_history_keeps_context_versions_inside_their_session(
    client, opensearch, index_name, user_id
) -> None:
    """A CONTEXT draft later made USER: its superseded CONTEXT version is history only for
    queries of its own session, by the same rule as current results."""
    (draft,) = await _load(
        client,
        opensearch,
        index_name,
        user_id,
        [{"content": "draft: my salary is 90k", "scope": "CONTEXT", "session_id": "s1"}],
    )
    response = await client.patch(
        f"/v1/users/{user_id}/memories/{draft['id']}", json={"scope": "USER"}
    )
    assert response.status_code == 200, response.text
    promoted = response.json()
    assert promoted["scope"] == "USER"

    outside = await search(client, user_id, "salary previously")
    assert outside["query_analysis"]["history_intent"] is True
    assert [r["memory"]["id"] for r in outside["results"]] == [promoted["id"]]

    inside = await search(client, user_id, "salary previously", session_id="s1")
    assert [r["memory"]["id"] for r in inside["results"]] == [promoted["id"], draft["id"]]
    assert inside["results"][1]["history_of"] == promoted["id"]


async def test_explanation_does_not_depend_on_other_users_documents(
    client, opensearch, index_name, user_id, other_user_id
) -> None:
    """BM25 scores use index-wide term statistics: if the explanation showed them, a user
    could tell whether other users store a word. What the user sees must not change."""
    word = f"quokka{uuid.uuid4().hex[:6]}"
    await _load(
        client,
        opensearch,
        index_name,
        user_id,
        [
            {"content": f"I saw a {word} on holiday"},
            {"content": f"My sister wants a {word} plush for her birthday"},
            {"content": "I prefer tea to coffee"},
        ],
    )

    def seen(found: dict) -> list:
        return [(r["memory"]["id"], r["rank"], r["explanation"]) for r in found["results"]]

    before = seen(await search(client, user_id, word, stages={"rerank": False}))
    assert any("bm25" in explanation for _, _, explanation in before)
    await _load(
        client,
        opensearch,
        index_name,
        other_user_id,
        [{"content": f"{word} fact number {i}: the {word} is a marsupial"} for i in range(40)],
    )
    after = seen(await search(client, user_id, word, stages={"rerank": False}))
    assert after == before
