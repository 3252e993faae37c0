"""The context block (POST /v1/users/{u}/context) and the profile (GET /v1/users/{u}/profile)
through the in-process API: budgets, isolation, changes with what they replaced, templates."""

from __future__ import annotations

import json

import pytest

from app.retrieval.context_block import estimate_tokens
from tests.retrieval.test_pipeline_api import _load

pytestmark = pytest.mark.xdist_group("context")

FACTS = [
    {"content": "I live in Lyon", "category": "personal_details"},
    {"content": "I work as a nurse at the city hospital", "category": "professional"},
    {"content": "I am allergic to peanuts", "category": "health"},
    {"content": "My favourite food is ramen with extra chili", "category": "dietary"},
    {"content": "I play the cello in an amateur orchestra on Sundays", "category": "hobbies"},
    {"content": "My sister Anna has two kids", "category": "relationships"},
]


async def _context(client, user_id: str, **body) -> dict:
    response = await client.post(f"/v1/users/{user_id}/context", json=body)
    assert response.status_code == 200, response.text
    return response.json()


async def _move_to_nantes(client, user_id: str, created: list[dict]) -> dict:
    lyon = next(m for m in created if m["content"] == "I live in Lyon")
    response = await client.patch(
        f"/v1/users/{user_id}/memories/{lyon['id']}",
        json={"content": "I live in Nantes", "event_time": "2023-05-08T10:00:00Z"},
    )
    assert response.status_code == 200, response.text
    return response.json()


@pytest.fixture
async def loaded(client, opensearch, index_name, user_id, other_user_id) -> list[dict]:
    created = await _load(client, opensearch, index_name, user_id, FACTS)
    # Another user with a memory as close to the query as can be: never in this user's block.
    await _load(
        client,
        opensearch,
        index_name,
        other_user_id,
        [{"content": "I am allergic to peanuts and shellfish", "category": "health"}],
    )
    return created


async def test_block_cites_the_users_current_memories_query_hits_first(client, user_id, loaded):
    ids = {m["id"] for m in loaded}
    found = await _context(client, user_id, query="what is the user allergic to?")
    cited = found["cited"]
    assert cited[0]["section"] == "relevant"
    assert cited[0]["content"] == "I am allergic to peanuts"
    assert {c["id"] for c in cited} <= ids  # never the other user's, never an unknown id
    assert "shellfish" not in found["block"]
    assert len({c["chain_id"] for c in cited}) == len(cited)  # each memory once
    assert len(cited) == len(FACTS)  # the budget (1000) holds them all
    assert not found["truncated"]
    assert found["tokens"] == estimate_tokens(found["block"]) <= found["max_tokens"] == 1000
    for memory in loaded:
        assert memory["content"] in found["block"]


async def test_small_budget_truncates_most_useful_first(client, user_id, loaded):
    whole = await _context(client, user_id, query="what is the user allergic to?")
    small = await _context(client, user_id, query="what is the user allergic to?", max_tokens=60)
    assert small["truncated"]
    assert 0 < small["tokens"] <= 60 < whole["tokens"]
    assert 0 < len(small["cited"]) < len(whole["cited"])
    assert small["cited"][0] == whole["cited"][0]  # the query's best hit survives the cut
    assert estimate_tokens(small["block"]) == small["tokens"]
    assert all(c["content"] in small["block"] for c in small["cited"])


async def test_change_line_shows_old_and_new_with_its_date(client, user_id, loaded):
    nantes = await _move_to_nantes(client, user_id, loaded)
    found = await _context(client, user_id)  # no query: changes, then the profile
    change = next(c for c in found["cited"] if c["section"] == "changes")
    assert change["id"] == nantes["id"]
    assert change["replaced_content"] == "I live in Lyon"
    assert change["date"].startswith("2023-05-08")
    assert (
        "- [2023-05-08] (personal_details) I live in Nantes (changed from: I live in Lyon)"
        in (found["block"])
    )
    # The superseded version is never a line of its own.
    assert not any(c["content"] == "I live in Lyon" for c in found["cited"])
    assert found["block"].count("Lyon") == 1
    assert {c["section"] for c in found["cited"]} == {"changes", "profile"}
    assert len(found["cited"]) == len(FACTS)


async def test_json_template(client, user_id, loaded):
    await _move_to_nantes(client, user_id, loaded)
    found = await _context(
        client,
        user_id,
        query="where does the user live?",
        template="json",
        as_of="2024-01-01T00:00:00Z",
    )
    document = json.loads(found["block"])
    assert document["as_of"] == "2024-01-01"
    # The only change is the query's first hit, stated there once: no "changes" section.
    assert set(document) == {"as_of", "relevant", "profile"}
    first = document["relevant"][0]
    assert first == {
        "date": "2023-05-08",
        "category": "personal_details",
        "content": "I live in Nantes",
        "replaced": "I live in Lyon",
    }
    stated = [
        line["content"]
        for section in ("relevant", "changes", "profile")
        for line in document.get(section, [])
    ]
    assert stated == [c["content"] for c in found["cited"]]
    assert found["tokens"] <= found["max_tokens"]


async def test_markdown_template_and_empty_user(client, user_id, other_user_id, loaded):
    found = await _context(client, user_id, template="markdown", max_tokens=200)
    assert found["block"].startswith("# What you know about the user")
    assert "## About the user" in found["block"]
    nothing = await _context(client, f"{other_user_id}-none", query="anything")
    assert nothing == {
        "block": "",
        "template": "text",
        "cited": [],
        "tokens": 0,
        "max_tokens": 1000,
        "truncated": False,
    }


async def test_context_checks_its_body_as_search_does(client, user_id):
    for body in ({"max_tokens": 10}, {"query": ""}, {"template": "html"}, {"top_k": 0}):
        response = await client.post(f"/v1/users/{user_id}/context", json=body)
        assert response.status_code == 400, body
    response = await client.post(
        f"/v1/users/{user_id}/context",
        json={"query": "x", "filters": {"field": "nope", "op": "eq", "value": 1}},
    )
    assert response.status_code == 400


async def test_profile_after_an_update(client, user_id, loaded):
    nantes = await _move_to_nantes(client, user_id, loaded)
    await client.post(
        f"/v1/users/{user_id}/memories",
        json={"content": "I moved into a flat near the Loire", "category": "personal_details"},
    )
    response = await client.get(f"/v1/users/{user_id}/profile")
    assert response.status_code == 200, response.text
    profile = response.json()
    assert profile["total"] == len(FACTS) + 1
    counts = {c["category"]: c["count"] for c in profile["categories"]}
    assert counts["personal_details"] == 2
    assert sum(counts.values()) == profile["total"]
    details = next(c for c in profile["categories"] if c["category"] == "personal_details")
    assert [f["memory"]["content"] for f in details["memories"]] == [
        "I moved into a flat near the Loire",  # written now, after 2023-05-08
        "I live in Nantes",
    ]
    moved = details["memories"][1]
    assert moved["memory"]["id"] == nantes["id"]
    assert moved["since"].startswith("2023-05-08")
    assert moved["replaced"]["content"] == "I live in Lyon"
    assert moved["replaced"]["version"] == 1
    assert moved["replaced"]["superseded_at"] is not None
    assert details["memories"][0]["replaced"] is None
    assert profile["last_changed_at"] >= moved["replaced"]["superseded_at"]

    filtered = await client.get(
        f"/v1/users/{user_id}/profile", params={"category": "health", "per_category": 1}
    )
    assert filtered.status_code == 200
    assert [c["category"] for c in filtered.json()["categories"]] == ["health"]
    by_filter = await client.get(
        f"/v1/users/{user_id}/profile",
        params={
            "filters": json.dumps({"field": "category", "op": "in", "value": ["health", "dietary"]})
        },
    )
    assert by_filter.status_code == 200, by_filter.text
    assert {c["category"] for c in by_filter.json()["categories"]} == {"health", "dietary"}
