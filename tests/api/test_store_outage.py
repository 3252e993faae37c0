"""Postgres unreachable: every request that needs it is a 503 problem+json with Retry-After,
never a 500, and /ready agrees.

A separate API process whose database URL names a port where nothing listens: the outage is
real (the driver's own connection errors), not simulated.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from tests.conftest import ApiProcess


@pytest.fixture(scope="module")
def api_without_postgres(migrated: dict[str, str]) -> Iterator[ApiProcess]:
    port = _dead_port()
    database_url = migrated["COGNIS_DATABASE_URL"]
    scheme, rest = database_url.split("://", 1)
    credentials, location = rest.split("@", 1)
    database = location.split("/", 1)[1]
    env = {
        **migrated,
        "COGNIS_DATABASE_URL": f"{scheme}://{credentials}@127.0.0.1:{port}/{database}",
        "COGNIS_RELAY_IN_API": "false",
        "COGNIS_INGEST_WORKER_IN_API": "false",
    }
    process = ApiProcess(env, "api-no-postgres")
    process.wait_ready(path="/health")  # never ready, but it starts
    yield process
    process.stop()


async def test_postgres_outage_is_503_with_retry_after(
    api_without_postgres: ApiProcess, user_id: str
) -> None:
    async with api_without_postgres.client() as http:
        ready = await http.get("/ready")
        responses = {
            "create": await http.post(
                f"/v1/users/{user_id}/memories",
                json={"content": "my salary is 90k", "category": "financial"},
            ),
            "list": await http.get(f"/v1/users/{user_id}/memories"),
            "search": await http.post(f"/v1/users/{user_id}/search", json={"query": "salary"}),
            "message": await http.post(
                f"/v1/users/{user_id}/messages",
                json={"messages": [{"content": "my salary is 90k", "speaker": "user"}]},
            ),
            "erase": await http.delete(f"/v1/users/{user_id}"),
        }
    assert ready.status_code == 503
    assert ready.json()["postgres"].startswith("down") and ready.json()["status"] == "down"
    for name, response in responses.items():
        assert response.status_code == 503, (name, response.text)
        assert response.headers["content-type"].startswith("application/problem+json"), name
        assert int(response.headers["retry-after"]) > 0, name
        problem = response.json()
        assert problem["title"] == "Store unavailable", name
        assert "postgres" in problem["detail"], name
        assert "salary" not in response.text, name
    log = api_without_postgres.log_text()
    assert "api.unhandled_error" not in log
    assert "api.store_unavailable" in log


def _dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_outage_rule_names_the_store_and_spares_query_errors(db) -> None:
    """The classifier behind the handler, on real errors of both drivers."""
    from opensearchpy import AsyncOpenSearch
    from sqlalchemy import text
    from sqlalchemy.ext.asyncio import create_async_engine

    from app.outages import unavailable_store

    search = AsyncOpenSearch(hosts=[f"http://127.0.0.1:{_dead_port()}"], max_retries=0)
    with pytest.raises(Exception) as opensearch_down:
        await search.info()
    await search.close()
    dead = create_async_engine(f"postgresql+asyncpg://x:y@127.0.0.1:{_dead_port()}/x")
    with pytest.raises(Exception) as postgres_down:
        async with dead.connect() as connection:
            await connection.execute(text("SELECT 1"))
    await dead.dispose()
    with pytest.raises(Exception) as query_error:
        async with db.connect() as connection:
            await connection.execute(text("SELECT 1 / 0"))

    assert unavailable_store(opensearch_down.value) == "opensearch"
    assert unavailable_store(postgres_down.value) == "postgres"
    assert unavailable_store(query_error.value) is None
    assert unavailable_store(ConnectionRefusedError("not raised by a store driver")) is None
