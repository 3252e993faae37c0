"""Isolation: user B can never see or change user A's memories, through any path or leg."""

from __future__ import annotations

from tests.conftest import wait_until
from tests.factories import create_memory, indexed_document, search, stage_rank


async def test_other_user_cannot_read_or_change(
    client, opensearch, index_name, user_id, other_user_id
) -> None:
    secret = await create_memory(
        client, user_id, "My bank PIN hint is quetzalcoatl", category="financial"
    )
    await create_memory(client, other_user_id, "I like hiking in the quetzal forest")

    async def indexed():  # both legs must have A's memory before B searches
        return await indexed_document(opensearch, index_name, secret["id"])

    await wait_until(indexed)
    await opensearch.indices.refresh(index=index_name)

    # A finds it through both legs ...
    own = await search(client, user_id, "quetzalcoatl")
    assert own["results"][0]["memory"]["id"] == secret["id"]
    assert stage_rank(own["results"][0], "bm25") == 1

    # ... B never does, by keyword (BM25 leg) or by meaning (vector leg).
    for query in ("quetzalcoatl", "bank PIN hint"):
        found = await search(client, other_user_id, query, top_k=50)
        ids = {r["memory"]["id"] for r in found["results"]}
        assert secret["id"] not in ids
        assert all(r["memory"]["user_id"] == other_user_id for r in found["results"])

    base = f"/v1/users/{other_user_id}/memories/{secret['id']}"
    for response in (
        await client.get(base),
        await client.get(f"{base}/history"),
        await client.patch(base, json={"content": "hijacked"}),
        await client.delete(base),
    ):
        assert response.status_code == 404, response.text
        assert response.headers["content-type"].startswith("application/problem+json")

    listed = (
        await client.get(
            f"/v1/users/{other_user_id}/memories", params={"include_superseded": "true"}
        )
    ).json()
    assert secret["id"] not in {m["id"] for m in listed["items"]}

    # A's memory is untouched.
    history = (await client.get(f"/v1/users/{user_id}/memories/{secret['id']}/history")).json()
    assert [v["content"] for v in history["versions"]] == ["My bank PIN hint is quetzalcoatl"]
    assert history["versions"][0]["is_current"] is True


async def test_context_memories_stay_in_their_session(
    client, opensearch, index_name, user_id
) -> None:
    note = await create_memory(
        client, user_id, "Draft the xylophone budget", scope="CONTEXT", session_id="s-a"
    )

    async def indexed():
        return await indexed_document(opensearch, index_name, note["id"])

    await wait_until(indexed)
    await opensearch.indices.refresh(index=index_name)
    in_session = await search(client, user_id, "xylophone budget", session_id="s-a")
    assert note["id"] in {r["memory"]["id"] for r in in_session["results"]}
    other_session = await search(client, user_id, "xylophone budget", session_id="s-b")
    assert note["id"] not in {r["memory"]["id"] for r in other_session["results"]}
    no_session = await search(client, user_id, "xylophone budget")
    assert note["id"] not in {r["memory"]["id"] for r in no_session["results"]}
