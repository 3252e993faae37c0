"""One model pass per text, counted on the running API's own metrics
(cognis_embedding_texts_total and cognis_embedding_batches_total)."""

from __future__ import annotations

import asyncio

import httpx
import numpy as np
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.ingest.helpers import ingest, message, model_counts, rows


async def _warm_up(client: httpx.AsyncClient, user_id: str) -> None:
    """The category classifier embeds its 15 descriptions on first use: get that done."""
    response = await client.post(f"/v1/users/{user_id}/memories", json={"content": "warm-up"})
    assert response.status_code == 201, response.text


async def test_a_message_is_embedded_once_from_submission_to_memory(
    client: httpx.AsyncClient, db: AsyncEngine, user_id: str
) -> None:
    await _warm_up(client, user_id)
    before = await model_counts(client)

    job = await ingest(client, user_id, message("I adopted a greyhound called Pixel"))

    after = await model_counts(client)
    assert after["texts"] - before["texts"] == 1  # step 1 only: steps 3 and 4 reuse it
    (decision,) = job["messages"][0]["decisions"]
    assert decision["operation"] == "ADD"
    (row,) = await rows(
        db,
        "SELECT m.embedding_768d::text AS memory_768, g.embedding_768d::text AS message_768,"
        " m.embedding_256d::text AS memory_256, g.embedding_256d::text AS message_256"
        " FROM memories m JOIN messages g ON g.id = m.source_message_id"
        " WHERE m.user_id = :u AND m.id = :id",
        u=user_id,
        id=decision["memory_id"],
    )
    assert row["memory_768"] == row["message_768"] and row["memory_256"] == row["message_256"]
    full = np.array(row["memory_768"].strip("[]").split(","), dtype=np.float32)
    coarse = np.array(row["memory_256"].strip("[]").split(","), dtype=np.float32)
    # The 256D vector is the re-normalised prefix of the 768D one (SPEC section 2).
    np.testing.assert_allclose(coarse, full[:256] / np.linalg.norm(full[:256]), atol=1e-5)


async def test_unchanged_content_is_never_embedded_again(
    client: httpx.AsyncClient, user_id: str
) -> None:
    await _warm_up(client, user_id)
    created = await client.post(
        f"/v1/users/{user_id}/memories", json={"content": "I play the cello on Sundays"}
    )
    memory_id = created.json()["id"]
    before = await model_counts(client)

    patched = await client.patch(
        f"/v1/users/{user_id}/memories/{memory_id}", json={"metadata": {"source": "review"}}
    )
    assert patched.status_code == 200, patched.text
    unchanged = await model_counts(client)
    reworded = await client.patch(
        f"/v1/users/{user_id}/memories/{patched.json()['id']}",
        json={"content": "I play the viola on Sundays"},
    )
    assert reworded.status_code == 200, reworded.text
    after = await model_counts(client)

    assert unchanged["texts"] == before["texts"]
    assert after["texts"] - unchanged["texts"] == 1


async def test_concurrent_requests_share_model_calls(
    client: httpx.AsyncClient, user_id: str
) -> None:
    await _warm_up(client, user_id)
    before = await model_counts(client)

    responses = await asyncio.gather(
        *(
            client.post(
                f"/v1/users/{user_id}/memories",
                json={"content": f"Concurrent fact number {i} about gardening"},
            )
            for i in range(8)
        )
    )

    assert all(r.status_code == 201 for r in responses)
    after = await model_counts(client)
    assert after["texts"] - before["texts"] == 8
    # While one model call runs the others queue up and go together in the next.
    assert after["batches"] - before["batches"] < 8
