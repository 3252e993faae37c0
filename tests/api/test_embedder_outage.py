"""An embedding server that cannot be reached: writes are 503 problem+json with Retry-After and
write nothing, searches answer from BM25 alone and say the vector leg is missing, /ready is not
ready and says why.

A separate API process, because its configuration (the http backend pointed at a port where
nothing listens) is the point of the test.
"""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.conftest import ApiProcess


async def test_unreachable_embedder_is_503_and_writes_nothing(
    api_without_embedder: ApiProcess, dead_embedder_url: str, db: AsyncEngine, user_id: str
) -> None:
    async with api_without_embedder.client(timeout=30) as http:
        single = await http.post(
            f"/v1/users/{user_id}/memories",
            json={"content": "Alice keeps bees on her roof.", "category": "hobbies"},
        )
        unclassified = await http.post(
            f"/v1/users/{user_id}/memories", json={"content": "Alice moved to Lisbon."}
        )
        batch = await http.post(
            f"/v1/users/{user_id}/memories/batch",
            json={"memories": [{"content": "Alice speaks Portuguese.", "category": "educational"}]},
        )
        ready = await http.get("/ready")

    # Degraded, not down: 200, so a load balancer keeps the instance (searches still answer).
    assert ready.status_code == 200, ready.text
    assert ready.json()["status"] == "degraded" and ready.json()["search"] == "bm25-only"
    assert ready.json()["model"] == "unreachable: ConnectError"
    assert ready.json()["postgres"] == "up" and ready.json()["opensearch"] == "up"
    for response in (single, unclassified, batch):
        assert response.status_code == 503, response.text
        assert response.headers["content-type"].startswith("application/problem+json")
        assert int(response.headers["retry-after"]) > 0
        problem = response.json()
        assert problem["status"] == 503 and problem["title"] == "Embedder unavailable"
        assert f"{dead_embedder_url}/embeddings" in problem["detail"]
        assert "Alice" not in problem["detail"]
    async with db.connect() as conn:
        memories = await conn.scalar(
            text("SELECT count(*) FROM memories WHERE user_id = :u"), {"u": user_id}
        )
        outbox = await conn.scalar(
            text("SELECT count(*) FROM outbox WHERE user_id = :u"), {"u": user_id}
        )
    assert (memories, outbox) == (0, 0)


async def test_a_search_answers_from_bm25_alone_without_the_model(
    api_without_embedder: ApiProcess, api: ApiProcess, user_id: str
) -> None:
    """The memory is written through the session's API (its model service is up); the API
    without one finds it by BM25 and says the vector leg is missing, and why."""
    async with api.client() as http:
        created = await http.post(
            f"/v1/users/{user_id}/memories",
            json={"content": "Alice keeps bees on her roof in Lisbon.", "category": "hobbies"},
        )
        assert created.status_code == 201, created.text
    async with api_without_embedder.client(timeout=30) as http:
        search = await http.post(
            f"/v1/users/{user_id}/search",
            json={"query": "bees on the roof", "consistency": "indexed"},
        )
    assert search.status_code == 200, search.text
    body = search.json()
    assert body["missing_legs"] == ["vector"]
    assert body["stages"]["vector"].startswith("unavailable")
    assert body["stages"]["bm25"] == "on"
    assert [hit["memory"]["content"] for hit in body["results"]] == [
        "Alice keeps bees on her roof in Lisbon."
    ]


async def test_without_either_leg_a_search_is_503(
    api_without_embedder: ApiProcess, user_id: str
) -> None:
    """BM25 switched off: nothing can answer, so the model's 503 with Retry-After."""
    async with api_without_embedder.client(timeout=30) as http:
        search = await http.post(
            f"/v1/users/{user_id}/search",
            json={"query": "Alice's bees", "stages": {"bm25": False}},
        )
    assert search.status_code == 503, search.text
    assert int(search.headers["retry-after"]) > 0
    assert search.json()["title"] == "Embedder unavailable"
