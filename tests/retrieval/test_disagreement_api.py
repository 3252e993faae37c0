"""Lever newer_first through the real API: of two current memories that contradict each other,
the newer ranks above the older, which is marked earlier in search and in the context block;
facts that can both hold are left as they are, and no user's memory marks another's."""

from __future__ import annotations

import pytest

from tests.factories import search
from tests.retrieval.test_pipeline_api import _load

pytestmark = pytest.mark.xdist_group("context")

BOSTON = {
    "content": "Hi, I'm Priya. I live in Boston.",
    "category": "personal_details",
    "event_time": "2024-01-05T10:00:00Z",
}
SEATTLE = {
    "content": "I moved to Seattle last month.",
    "category": "personal_details",
    "event_time": "2024-03-02T10:00:00Z",
}
OTHER_FACTS = [
    {"content": "I play tennis on Saturdays", "category": "hobbies"},
    {"content": "I play chess online with my brother", "category": "hobbies"},
    {"content": "My sister lives in Denver", "category": "relationships"},
    {"content": "I work as a nurse at the children's hospital", "category": "professional"},
]


def _hits(found: dict) -> dict[str, dict]:
    return {hit["memory"]["content"]: hit for hit in found["results"]}


async def test_the_newer_place_ranks_first_and_the_older_is_marked_earlier(
    client, opensearch, index_name, user_id, other_user_id
) -> None:
    _, seattle, *_ = await _load(
        client, opensearch, index_name, user_id, [BOSTON, SEATTLE, *OTHER_FACTS]
    )
    # Another user's newer place: never a reason to mark this user's.
    await _load(
        client,
        opensearch,
        index_name,
        other_user_id,
        [{**SEATTLE, "content": "I moved to Chicago", "event_time": "2024-06-01T10:00:00Z"}],
    )
    found = await search(client, user_id, "Which city do I live in?", top_k=6)
    hits = _hits(found)
    assert {BOSTON["content"], SEATTLE["content"]} <= set(hits), (found["stages"], list(hits))
    older, newer = hits[BOSTON["content"]], hits[SEATTLE["content"]]
    assert older["memory"]["is_current"] and newer["memory"]["is_current"]
    assert newer["rank"] < older["rank"]
    assert older["earlier"] is True
    assert older["later_memory_id"] == seattle["id"]
    assert older["explanation"]["newer_first"]["rank"] == older["rank"]
    # Facts that can both hold are not marked: two hobbies, another person's home.
    for content, hit in hits.items():
        if content != BOSTON["content"]:
            assert hit["earlier"] is False and hit["later_memory_id"] is None, content
    assert found["stages"]["newer_first"].startswith("1 marked earlier")
    assert "newer_first_ms" in found["stage_durations_ms"]

    # The lever off (and the paper profile): the order is the fused one, nothing marked.
    plain = await search(
        client, user_id, "Which city do I live in?", top_k=6, levers={"newer_first": False}
    )
    assert not any(hit["earlier"] for hit in plain["results"])
    assert "newer_first" not in plain["stages"]
    paper = await search(client, user_id, "Which city do I live in?", profile="paper")
    assert not any(hit["earlier"] for hit in paper["results"])

    # The other user's search: their own memory only, unmarked.
    theirs = await search(client, other_user_id, "Which city do I live in?")
    assert [h["memory"]["content"] for h in theirs["results"]] == ["I moved to Chicago"]
    assert theirs["results"][0]["earlier"] is False


async def test_the_context_block_states_the_newer_fact_first_and_the_older_as_earlier(
    client, opensearch, index_name, user_id
) -> None:
    _, seattle, *_ = await _load(
        client, opensearch, index_name, user_id, [BOSTON, SEATTLE, *OTHER_FACTS]
    )
    for body in ({"query": "Which city do I live in?"}, {}):  # hits, and the profile alone
        response = await client.post(f"/v1/users/{user_id}/context", json=body)
        assert response.status_code == 200, response.text
        block = response.json()
        cited = [c["content"] for c in block["cited"]]
        assert cited.index(SEATTLE["content"]) < cited.index(BOSTON["content"]), body
        earlier = next(c for c in block["cited"] if c["content"] == BOSTON["content"])
        assert earlier["later_id"] == seattle["id"]
        assert earlier["later_content"] == SEATTLE["content"]
        assert f"{BOSTON['content']} (earlier; later: {SEATTLE['content']})" in block["block"]
        assert block["block"].count("(earlier;") == 1, block["block"]
        others = [c for c in block["cited"] if c["content"] != BOSTON["content"]]
        assert all(c["later_id"] is None for c in others)

    body = {"query": "Which city do I live in?", "template": "json"}
    response = await client.post(f"/v1/users/{user_id}/context", json=body)
    assert '"earlier_than":"I moved to Seattle last month."' in response.json()["block"]
