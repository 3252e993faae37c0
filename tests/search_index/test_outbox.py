"""Outbox delivery to OpenSearch: BM25 findability, outages, stale events, reindex."""

from __future__ import annotations

from sqlalchemy import text

from tests.conftest import only_running, run_cli_async, wait_until
from tests.factories import create_memory, indexed_document, search, stage_rank


async def test_rare_keyword_is_found_through_bm25(client, opensearch, index_name, user_id) -> None:
    filler = [f"I enjoy ordinary activity number {i}" for i in range(12)]
    for content in filler:
        await create_memory(client, user_id, content, category="hobbies")
    rare = await create_memory(client, user_id, "Grandpa's heirloom is a glockenspiel")

    async def indexed():
        return await indexed_document(opensearch, index_name, rare["id"])

    document = await wait_until(indexed)
    assert document["_source"]["user_id"] == user_id
    assert document["_source"]["is_current"] is True
    await opensearch.indices.refresh(index=index_name)

    found = await search(client, user_id, "glockenspiel", top_k=3)
    top = found["results"][0]
    assert top["memory"]["id"] == rare["id"]
    assert stage_rank(top, "bm25") == 1
    assert found["missing_legs"] == []


async def test_update_marks_the_old_document_superseded(
    client, opensearch, index_name, user_id
) -> None:
    first = await create_memory(client, user_id, "I collect vintage tamagotchis")
    second = (
        await client.patch(
            f"/v1/users/{user_id}/memories/{first['id']}",
            json={"content": "I collect vintage gameboys"},
        )
    ).json()

    async def both_delivered():
        old = await indexed_document(opensearch, index_name, first["id"])
        # A document per version, named by the version's id (the memory keeps its own).
        new = await indexed_document(opensearch, index_name, second["version_id"])
        return old and new and old["_source"]["is_current"] is False and (old, new)

    _, new = await wait_until(both_delivered)
    assert new["_source"]["is_current"] is True
    await opensearch.indices.refresh(index=index_name)
    found = await search(client, user_id, "tamagotchis")
    assert first["version_id"] not in {r["memory"]["version_id"] for r in found["results"]}


async def test_outage_loses_nothing(
    relay, api_without_opensearch, dead_opensearch_env, client, db, opensearch, index_name, user_id
) -> None:
    # Freeze every other process (the relay among them) so only the outage instance is live.
    with only_running(api_without_opensearch):
        created = await _write_during_outage(
            api_without_opensearch, dead_opensearch_env, db, opensearch, index_name, user_id
        )

    # OpenSearch is "back" (the healthy API's relay runs again): after its backoff the
    # event is retried and arrives.
    async with db.begin() as connection:
        await connection.execute(
            text("UPDATE outbox SET next_attempt_at = now() WHERE memory_id = :m"),
            {"m": created["id"]},
        )

    async def delivered():
        return await indexed_document(opensearch, index_name, created["id"])

    document = await wait_until(delivered)
    assert document["_source"]["content"] == "The wifi password rhymes with marzipan"
    await opensearch.indices.refresh(index=index_name)
    assert stage_rank((await search(client, user_id, "marzipan"))["results"][0], "bm25") == 1


async def _write_during_outage(down_api, dead_env, db, opensearch, index_name, user_id) -> dict:
    async with down_api.client() as down:
        created = await create_memory(down, user_id, "The wifi password rhymes with marzipan")
        # Search still answers, vector-only, and says which leg is missing.
        found = await search(down, user_id, "marzipan")
        assert found["missing_legs"] == ["bm25"]
        assert found["results"][0]["memory"]["id"] == created["id"]
        assert stage_rank(found["results"][0], "bm25") is None
        ready = (await down.get("/ready")).json()
        assert ready["status"] == "degraded"
        assert ready["opensearch"] == "down"

    # A relay that cannot reach OpenSearch records the failure and keeps the event.
    failed = await run_cli_async(dead_env, "app", "relay", "--once")
    assert failed.returncode == 1, failed.stdout + failed.stderr
    async with db.connect() as connection:
        row = (
            await connection.execute(
                text(
                    "SELECT attempts, last_error, processed_at FROM outbox "
                    "WHERE memory_id = :m ORDER BY id"
                ),
                {"m": created["id"]},
            )
        ).one()
    assert row.attempts >= 1
    assert "Connection" in row.last_error
    assert row.processed_at is None
    assert await indexed_document(opensearch, index_name, created["id"]) is None
    return created


async def test_stale_event_never_overwrites_newer_state(
    inprocess_api, service_urls, opensearch, index_name, user_id
) -> None:
    from app.config import Settings
    from app.search_index.client import MemoryIndex

    index = MemoryIndex(
        Settings(
            database_url="postgresql+asyncpg://unused@127.0.0.1/unused",
            opensearch_url=service_urls.opensearch_url,
            opensearch_index=index_name,
        ).store
    )
    try:
        doc_id = "00000000-0000-4000-8000-000000000001"
        newer = {"user_id": user_id, "content": "newer", "is_current": True}
        older = {"user_id": user_id, "content": "older", "is_current": True}
        assert (await index.bulk_index([(doc_id, 20, newer)]))[0].ok
        # The replayed older event is refused by OpenSearch (409) and counted as done.
        assert (await index.bulk_index([(doc_id, 10, older)]))[0].ok
        stored = await opensearch.get(index=index_name, id=doc_id)
        assert stored["_source"]["content"] == "newer"
        assert stored["_version"] == 20
    finally:
        await opensearch.delete(index=index_name, id=doc_id, ignore=[404])
        await index.close()


async def test_reindex_rebuilds_a_lost_index_from_postgres(
    client, migrated, opensearch, index_name, user_id
) -> None:
    memory = await create_memory(client, user_id, "My lucky charm is a tardigrade figurine")

    async def indexed():
        return await indexed_document(opensearch, index_name, memory["id"])

    await wait_until(indexed)
    await opensearch.indices.delete(index=index_name)  # OpenSearch lost everything

    result = await run_cli_async(migrated, "app", "reindex")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "memory versions in all" in result.stdout
    # The CLI and the API's own relay share the work (SKIP LOCKED): either may deliver it.
    document = await wait_until(indexed)
    assert document["_source"]["content"] == "My lucky charm is a tardigrade figurine"
    mapping = await opensearch.indices.get_mapping(index=index_name)
    content = mapping[index_name]["mappings"]["properties"]["content"]
    assert content["analyzer"] == "memory_text"
    await opensearch.indices.refresh(index=index_name)
    assert stage_rank((await search(client, user_id, "tardigrade"))["results"][0], "bm25") == 1
