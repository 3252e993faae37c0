"""Two apps in one process (the tests' in-process API beside a traced one, an embedding host
that builds its own): each commits its own requests' writes.

The SQLAlchemy plugin keeps its session scope keys unique per process, so every config after
the first stores its request's session under a suffixed key; the commit handler must read
that config's key, or the second app's writes answer 2xx and are never committed."""

from __future__ import annotations

import uuid

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.conftest import API_KEY, InProcessApi, ServiceProcess, lifespan_running


async def test_an_app_built_after_another_in_the_process_commits_its_writes(
    inprocess_api: InProcessApi,
    migrated: dict[str, str],
    relay: ServiceProcess,
    db: AsyncEngine,
    user_id: str,
) -> None:
    # The session's in-process API is built: this one is at least the process's second.
    second = InProcessApi(
        {
            **migrated,
            "COGNIS_RELAY_IN_API": "false",
            "COGNIS_INGEST_WORKER_IN_API": "false",
            "COGNIS_INGEST_QUEUE": f"second-app-{uuid.uuid4().hex[:8]}",
        }
    )
    async with lifespan_running(second.app), second.client({"X-API-Key": API_KEY}) as http:
        created = await http.post(
            f"/v1/users/{user_id}/memories", json={"content": "I keep bees on the roof."}
        )
        assert created.status_code == 201, created.text
        read_back = await http.get(f"/v1/users/{user_id}/memories/{created.json()['id']}")
        assert read_back.status_code == 200, read_back.text

    # Committed: another connection, after the app has gone, reads the row.
    async with db.connect() as connection:
        stored = await connection.scalar(
            text("SELECT content FROM memories WHERE user_id = :u AND is_current"),
            {"u": user_id},
        )
    assert stored == "I keep bees on the roof."
