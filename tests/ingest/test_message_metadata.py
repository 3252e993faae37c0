"""A message's metadata reaches every memory it produces (issue 41, item 3): an ADD carries it,
an UPDATE merges it over the memory's own, and a metadata filter finds those memories."""

from __future__ import annotations

import json

import httpx

from tests.ingest.helpers import decisions, ingest, message


async def _filtered(client: httpx.AsyncClient, user_id: str, condition: dict) -> list[dict]:
    response = await client.get(
        f"/v1/users/{user_id}/memories", params={"filters": json.dumps(condition)}
    )
    assert response.status_code == 200, response.text
    return response.json()["items"]


async def test_message_metadata_is_on_its_memories_and_filters_find_them(
    client: httpx.AsyncClient, user_id: str
) -> None:
    added = await ingest(
        client,
        user_id,
        message("I keep three beehives in the garden", metadata={"source": "onboarding", "n": 1}),
    )
    await ingest(
        client, user_id, message("My favourite tea is oolong", metadata={"source": "chat"})
    )
    (decision,) = decisions(added)
    assert decision["operation"] == "ADD"

    onboarding = await _filtered(
        client, user_id, {"field": "metadata.source", "op": "eq", "value": "onboarding"}
    )
    assert [m["content"] for m in onboarding] == ["I keep three beehives in the garden"]
    assert onboarding[0]["metadata"] == {"source": "onboarding", "n": 1}


async def test_an_update_merges_the_message_metadata_over_the_memory_own(
    client: httpx.AsyncClient, user_id: str
) -> None:
    await ingest(
        client, user_id, message("I live in Valparaiso", metadata={"source": "import", "team": "a"})
    )
    moved = await ingest(
        client, user_id, message("I moved to Santiago last spring", metadata={"source": "chat"})
    )
    (decision,) = [d for d in decisions(moved) if d["operation"] == "UPDATE"]
    memory = (await client.get(f"/v1/users/{user_id}/memories/{decision['memory_id']}")).json()
    assert memory["metadata"] == {"source": "chat", "team": "a"}
    found = await _filtered(client, user_id, {"field": "metadata.team", "op": "eq", "value": "a"})
    assert [m["version_id"] for m in found] == [decision["memory_id"]]  # a version's id
