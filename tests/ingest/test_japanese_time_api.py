"""Japanese time words through the real API: ingestion step 2 and retrieval stage 1."""

# ruff: noqa: RUF001 (Japanese questions end in a full-width question mark)

from __future__ import annotations

from datetime import datetime

import httpx

from tests.conftest import wait_until
from tests.factories import indexed_document, search
from tests.ingest.helpers import current_memories, decisions, ingest, message


async def test_kinou_resolves_against_the_message_time(
    client: httpx.AsyncClient, user_id: str
) -> None:
    job = await ingest(
        client, user_id, message("昨日、大阪に引っ越しました", "2023-05-08T09:30:00+09:00")
    )
    (decision,) = decisions(job)
    (memory,) = await current_memories(client, user_id)
    assert memory["language"] == "ja"
    # The day before the message, in the sender's offset; not the message's own time.
    event_time = datetime.fromisoformat(memory["event_time"])
    assert event_time == datetime.fromisoformat("2023-05-07T00:00:00+09:00")
    assert datetime.fromisoformat(decision["event_time"]) == event_time


async def test_sengetsu_boosts_last_months_memory(client, opensearch, index_name, user_id) -> None:
    items = [
        {"content": "陶芸教室に通った", "event_time": "2023-02-20T10:00:00Z"},
        {"content": "陶芸のワークショップに参加した", "event_time": "2023-04-15T10:00:00Z"},
    ]
    response = await client.post(f"/v1/users/{user_id}/memories/batch", json={"memories": items})
    assert response.status_code == 201, response.text
    created = response.json()["items"]

    async def indexed() -> bool:
        return all([await indexed_document(opensearch, index_name, m["id"]) for m in created])

    await wait_until(indexed)
    await opensearch.indices.refresh(index=index_name)
    query = "先月はどんな陶芸をした？"
    found = await search(client, user_id, query, as_of="2023-05-08T10:00:00Z")
    assert found["stages"]["temporal"] == "applied"
    window = found["query_analysis"]["time_window"]
    assert (window["text"], window["granularity"]) == ("先月", "month")
    assert window["start"].startswith("2023-04-01")
    assert window["end"].startswith("2023-05-01")
    top = found["results"][0]
    assert top["memory"]["id"] == created[1]["id"]
    assert top["explanation"]["temporal"]["rank"] == 1
