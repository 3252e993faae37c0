"""A batch the server refuses as more model work than its deadline allows (413, in memories):
the Python client sends it again in the parts the server says would fit, each its own
transaction with its own idempotency key.

The in-process API's learnt model speed is fixed at 100 ms a character (10 s a memory of 100
characters), so the server's refusal is real and its numbers known; the model itself is much
faster, so every part it accepts is done."""

from __future__ import annotations

import httpx
import pytest
from cognis_client import AsyncCognisClient
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.conftest import API_KEY, InProcessApi


@pytest.fixture
def slow_estimate(inprocess_api: InProcessApi, monkeypatch: pytest.MonkeyPatch) -> None:
    batcher = inprocess_api.app.state.runtime.embedder.batcher
    monkeypatch.setattr(batcher, "seconds_per_unit", 0.1)
    monkeypatch.setattr(batcher, "_learn", lambda cost, seconds: None)


def _client(inprocess_api: InProcessApi) -> AsyncCognisClient:
    transport = httpx.ASGITransport(app=inprocess_api.app)
    return AsyncCognisClient(inprocess_api.url, api_key=API_KEY, transport=transport)


async def test_the_client_splits_a_refused_batch_into_parts_that_fit(
    inprocess_api: InProcessApi, slow_estimate: None, db: AsyncEngine, user_id: str
) -> None:
    # 12 memories of 100 characters: 120 s by the estimate, against the 55 s bulk deadline;
    # 5 fit (int(12 * 55 / 120)), so the parts are 5, 5 and 2.
    contents = [f"Ines's note {i:02}: " + "y" * 84 for i in range(12)]
    key = f"split-{user_id}"

    async with _client(inprocess_api) as cognis:
        written = await cognis.add_memories(user_id, contents, idempotency_key=key)
        # The same logical write again: every part replays, nothing is written twice.
        again = await cognis.add_memories(user_id, contents, idempotency_key=key)

    assert [m.content for m in written] == contents
    assert [m.id for m in again] == [m.id for m in written]
    async with db.connect() as conn:
        stored = await conn.scalar(
            text("SELECT count(*) FROM memories WHERE user_id = :u"), {"u": user_id}
        )
        keys = await conn.execute(
            text("SELECT key FROM idempotency_keys WHERE user_id = :u ORDER BY key"),
            {"u": user_id},
        )
        assert stored == 12
        # The refused whole left nothing behind, its key included.
        assert [row.key for row in keys] == [f"{key}:0", f"{key}:10", f"{key}:5"]
