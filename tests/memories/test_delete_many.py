"""DELETE /v1/users/{u}/memories (issue 41, item 5): every memory a filter keeps ends, as a
DELETE of each would, in one transaction; each keeps its history (nothing is removed, unlike
an erase). agent_id / run_id name exactly that agent's or run's memories; no filter at all
needs all=true."""

from __future__ import annotations

import json

from sqlalchemy import text

from tests.factories import create_memory, search


def _path(user_id: str) -> str:
    return f"/v1/users/{user_id}/memories"


async def _listed(client, user_id: str) -> set[str]:
    response = await client.get(_path(user_id), params={"limit": 200})
    assert response.status_code == 200, response.text
    return {m["content"] for m in response.json()["items"]}


async def _versions(db, user_id: str) -> list[tuple[str, bool]]:
    """Every version row of the user: (content, is_current)."""
    async with db.connect() as connection:
        rows = await connection.execute(
            text("SELECT content, is_current FROM memories WHERE user_id = :u ORDER BY content"),
            {"u": user_id},
        )
        return [(row.content, row.is_current) for row in rows]


async def test_an_agents_memories_end_and_keep_their_history(
    client, db, user_id, other_user_id
) -> None:
    shared = await create_memory(client, user_id, "Ines likes window seats")
    mine = [
        await create_memory(client, user_id, "Ines booked the Lisbon hotel", agent_id="planner"),
        await create_memory(
            client, user_id, "Ines booked the Porto train", agent_id="planner", run_id="trip-1"
        ),
    ]
    theirs = await create_memory(client, user_id, "Ines asked about visas", agent_id="helper")
    updated = await client.patch(
        f"{_path(user_id)}/{mine[0]['id']}", json={"content": "Ines booked the Lisbon flat"}
    )
    assert updated.status_code == 200, updated.text
    elsewhere = await create_memory(
        client, other_user_id, "Ines booked the Lisbon hotel", agent_id="planner"
    )

    response = await client.delete(
        _path(user_id), params={"agent_id": "planner", "wait_for": "indexed"}
    )
    assert response.status_code == 200, response.text
    assert response.headers["x-index-state"] == "indexed"
    ended = response.json()
    assert (ended["user_id"], ended["deleted"]) == (user_id, 2)
    assert set(ended["ids"]) == {m["id"] for m in mine}

    # Exactly the agent's: the shared memory and the other agent's stay, as does the other
    # user's memory of the same agent.
    assert await _listed(client, user_id) == {"Ines likes window seats", "Ines asked about visas"}
    assert await _listed(client, other_user_id) == {"Ines booked the Lisbon hotel"}
    found = await search(client, user_id, "What did Ines book?", consistency="indexed")
    assert {hit["memory"]["id"] for hit in found["results"]} <= {shared["id"], theirs["id"]}
    assert (await client.get(f"{_path(other_user_id)}/{elsewhere['id']}")).json()["is_current"]

    # History kept: the memory's id reads its last version, and its history has every one.
    last = await client.get(f"{_path(user_id)}/{mine[0]['id']}")
    assert last.status_code == 200, last.text
    assert (last.json()["content"], last.json()["is_current"]) == (
        "Ines booked the Lisbon flat",
        False,
    )
    assert last.json()["superseded_at"] is not None
    history = (await client.get(f"{_path(user_id)}/{mine[0]['id']}/history")).json()
    assert [(v["version"], v["is_current"]) for v in history["versions"]] == [
        (1, False),
        (2, False),
    ]
    assert await _versions(db, user_id) == [
        ("Ines asked about visas", True),
        ("Ines booked the Lisbon flat", False),
        ("Ines booked the Lisbon hotel", False),
        ("Ines booked the Porto train", False),
        ("Ines likes window seats", True),
    ]
    # Already ended: a second delete ends nothing, and a DELETE of one is a 409.
    again = await client.delete(_path(user_id), params={"agent_id": "planner"})
    assert again.json()["deleted"] == 0
    assert (await client.delete(f"{_path(user_id)}/{mine[1]['id']}")).status_code == 409


async def test_the_lists_filters_narrow_it_and_all_ends_every_memory(client, db, user_id) -> None:
    await create_memory(client, user_id, "Ines works on Apollo", metadata={"project": "apollo"})
    await create_memory(client, user_id, "Ines reviews Gemini", metadata={"project": "gemini"})
    await create_memory(client, user_id, "Ines is vegetarian", category="dietary")
    await create_memory(client, user_id, "Prepare the slides", scope="CONTEXT", session_id="s1")

    apollo = {"field": "metadata.project", "op": "eq", "value": "apollo"}
    by_filter = await client.delete(_path(user_id), params={"filters": json.dumps(apollo)})
    assert by_filter.json()["deleted"] == 1, by_filter.text
    by_category = await client.delete(_path(user_id), params={"category": "dietary"})
    assert by_category.json()["deleted"] == 1, by_category.text
    by_session = await client.delete(
        _path(user_id), params={"scope": "CONTEXT", "session_id": "s1"}
    )
    assert by_session.json()["deleted"] == 1, by_session.text
    assert await _listed(client, user_id) == {"Ines reviews Gemini"}

    everything = await client.delete(_path(user_id), params={"all": "true"})
    assert everything.json()["deleted"] == 1, everything.text
    assert await _listed(client, user_id) == set()
    assert [current for _, current in await _versions(db, user_id)] == [False] * 4


async def test_no_filter_without_all_is_refused_and_ends_nothing(client, db, user_id) -> None:
    """A DELETE .../memories/$ID whose $ID came out empty must not end every memory."""
    await create_memory(client, user_id, "Ines keeps bees")
    for path in (_path(user_id), f"{_path(user_id)}/"):
        refused = await client.delete(path)
        assert refused.status_code == 400, refused.text
        assert refused.headers["content-type"].startswith("application/problem+json")
        assert refused.json()["field"] == "all"
    bad = await client.delete(_path(user_id), params={"filters": '{"field": "nope"}'})
    assert bad.status_code == 400 and bad.json()["field"].startswith("filters"), bad.text
    blank = await client.delete(_path(user_id), params={"agent_id": ""})
    assert blank.status_code == 400, blank.text
    assert await _versions(db, user_id) == [("Ines keeps bees", True)]


async def test_a_retry_with_the_same_key_replays_the_answer(client, user_id) -> None:
    made = [await create_memory(client, user_id, f"Ines visited city {n}") for n in range(3)]
    key = {"Idempotency-Key": f"delete-all-{user_id}"}
    first = await client.delete(_path(user_id), params={"all": "true"}, headers=key)
    assert first.status_code == 200, first.text
    await create_memory(client, user_id, "Ines visited city 9")  # not ended by the replay
    replay = await client.delete(_path(user_id), params={"all": "true"}, headers=key)
    assert replay.status_code == 200, replay.text
    assert replay.headers["idempotency-replayed"] == "true"
    assert replay.json() == first.json()
    assert set(first.json()["ids"]) == {m["id"] for m in made}
    assert await _listed(client, user_id) == {"Ines visited city 9"}
