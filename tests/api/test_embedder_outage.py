"""An embedding server that cannot be reached: 503 problem+json with Retry-After, nothing written.

A separate API process, because its configuration (the http backend pointed at a port where
nothing listens) is the point of the test.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.conftest import ApiProcess


@pytest.fixture(scope="module")
def dead_embedder_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}/v1"


@pytest.fixture(scope="module")
def api_without_embedder(migrated: dict[str, str], dead_embedder_url: str) -> Iterator[ApiProcess]:
    env = {
        **migrated,
        "COGNIS_EMBEDDING_BACKEND": "http",
        "COGNIS_EMBEDDING_HTTP_URL": dead_embedder_url,
        "COGNIS_EMBEDDING_HTTP_MAX_RETRIES": "1",
        "COGNIS_EMBEDDING_HTTP_BACKOFF_BASE_S": "0.01",
        "COGNIS_INGEST_WORKER_IN_API": "false",
    }
    process = ApiProcess(env, "api-no-embedder")
    process.wait_ready()  # the embedder is first asked on a request, not at start-up
    yield process
    process.stop()


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
        search = await http.post(f"/v1/users/{user_id}/search", json={"query": "Alice's bees"})

    for response in (single, unclassified, batch, search):
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
