"""Erasure removes every row and document of one user, and nothing of anyone else."""

from __future__ import annotations

from tests.conftest import wait_until
from tests.factories import create_memory, indexed_document, user_row_counts


async def test_erase_user_empties_both_stores_for_that_user_only(
    client, db, opensearch, index_name, user_id, other_user_id
) -> None:
    mine = [await create_memory(client, user_id, f"Erasable fact {i}") for i in range(3)]
    await client.patch(
        f"/v1/users/{user_id}/memories/{mine[0]['id']}", json={"content": "Erasable fact zero"}
    )
    theirs = await create_memory(client, other_user_id, "A fact that must survive")

    async def all_indexed():
        docs = [await indexed_document(opensearch, index_name, m["id"]) for m in [*mine, theirs]]
        return all(docs)

    await wait_until(all_indexed)
    await opensearch.indices.refresh(index=index_name)
    before = await user_row_counts(db, user_id)
    assert before["memories"] == 4
    assert before["outbox"] >= 4

    response = await client.delete(f"/v1/users/{user_id}")
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["postgres"]["memories"] == 4
    assert body["postgres"]["outbox"] == before["outbox"]
    assert body["opensearch_deleted"] == 4
    assert body["opensearch_pending"] is False

    assert await user_row_counts(db, user_id) == {"memories": 0, "messages": 0, "outbox": 0}
    count = await opensearch.count(index=index_name, body={"query": {"term": {"user_id": user_id}}})
    assert count["count"] == 0
    listed = (
        await client.get(f"/v1/users/{user_id}/memories", params={"include_superseded": "true"})
    ).json()
    assert listed["items"] == []

    # The other user keeps everything.
    assert (await user_row_counts(db, other_user_id))["memories"] == 1
    assert await indexed_document(opensearch, index_name, theirs["id"]) is not None
    kept = await client.get(f"/v1/users/{other_user_id}/memories/{theirs['id']}")
    assert kept.status_code == 200
