"""Git-like versioning through the API, checked against the analysts' SQL functions."""

from __future__ import annotations

import asyncio

from sqlalchemy import text

from tests.factories import create_memory


async def test_two_updates_make_a_three_version_chain(client, db, user_id) -> None:
    first = await create_memory(client, user_id, "I live in Tokyo", category="personal_details")
    second = (
        await client.patch(
            f"/v1/users/{user_id}/memories/{first['id']}", json={"content": "I moved to Osaka"}
        )
    ).json()
    third_response = await client.patch(
        f"/v1/users/{user_id}/memories/{second['version_id']}", json={"content": "I moved to Kyoto"}
    )
    assert third_response.status_code == 200, third_response.text
    third = third_response.json()

    assert second["replaces_id"] == first["version_id"]
    assert third["replaces_id"] == second["version_id"]
    assert {first["chain_id"], second["chain_id"], third["chain_id"]} == {first["id"]}
    assert {second["id"], third["id"]} == {first["id"]}

    # History from any version returns the whole chain, oldest first.
    for any_id in (first["id"], third["version_id"]):
        history = (await client.get(f"/v1/users/{user_id}/memories/{any_id}/history")).json()
        versions = history["versions"]
        assert [v["content"] for v in versions] == [
            "I live in Tokyo",
            "I moved to Osaka",
            "I moved to Kyoto",
        ]
        assert [v["version"] for v in versions] == [1, 2, 3]
        assert [v["is_current"] for v in versions] == [False, False, True]
        assert versions[0]["superseded_at"] == versions[1]["created_at"]
        assert versions[1]["superseded_at"] == versions[2]["created_at"]
        assert versions[2]["superseded_at"] is None

    # The SQL chain function walks replaces_id both ways and agrees with the API.
    async with db.connect() as connection:
        for start in (first["version_id"], second["version_id"], third["version_id"]):
            rows = (
                await connection.execute(
                    text("SELECT id::text, version, is_current FROM memory_chain(:id)"),
                    {"id": start},
                )
            ).all()
            assert [(r.id, r.version, r.is_current) for r in rows] == [
                (first["version_id"], 1, False),
                (second["version_id"], 2, False),
                (third["version_id"], 3, True),
            ]
        statuses = (
            await connection.execute(
                text("SELECT version, status FROM memory_versions WHERE chain_id = :c ORDER BY 1"),
                {"c": first["id"]},
            )
        ).all()
        assert [s.status for s in statuses] == ["updated", "updated", "current"]


async def test_memories_as_of_shows_the_past_state(client, db, user_id) -> None:
    first = await create_memory(client, user_id, "My favourite colour is green")
    await asyncio.sleep(0.05)
    async with db.connect() as connection:
        between = (await connection.execute(text("SELECT now()"))).scalar_one()
    await asyncio.sleep(0.05)
    await client.patch(
        f"/v1/users/{user_id}/memories/{first['id']}",
        json={"content": "My favourite colour is red"},
    )
    async with db.connect() as connection:
        past = (
            (
                await connection.execute(
                    text("SELECT content FROM memories_as_of(:u, :t)"), {"u": user_id, "t": between}
                )
            )
            .scalars()
            .all()
        )
        now = (
            (
                await connection.execute(
                    text("SELECT content FROM memories_as_of(:u, now())"), {"u": user_id}
                )
            )
            .scalars()
            .all()
        )
        current_view = (
            (
                await connection.execute(
                    text("SELECT content FROM current_memories WHERE user_id = :u"), {"u": user_id}
                )
            )
            .scalars()
            .all()
        )
    assert past == ["My favourite colour is green"]
    assert now == ["My favourite colour is red"]
    assert current_view == ["My favourite colour is red"]


async def test_delete_ends_the_version_without_removing_it(client, db, user_id) -> None:
    memory = await create_memory(client, user_id, "I am vegetarian", category="dietary")
    response = await client.delete(f"/v1/users/{user_id}/memories/{memory['id']}")
    assert response.status_code == 200, response.text
    ended = response.json()
    assert ended["is_current"] is False
    assert ended["superseded_at"] is not None

    listed = (await client.get(f"/v1/users/{user_id}/memories")).json()
    assert listed["items"] == []
    with_history = (
        await client.get(f"/v1/users/{user_id}/memories", params={"include_superseded": "true"})
    ).json()
    assert [m["id"] for m in with_history["items"]] == [memory["id"]]
    async with db.connect() as connection:
        status = (
            await connection.execute(
                text("SELECT status FROM memory_versions WHERE id = :id"), {"id": memory["id"]}
            )
        ).scalar_one()
    assert status == "deleted"

    again = await client.delete(f"/v1/users/{user_id}/memories/{memory['id']}")
    assert again.status_code == 409
    assert "deleted" in again.json()["detail"]


async def test_updating_by_an_old_version_id_supersedes_the_current_one(client, user_id) -> None:
    first = await create_memory(client, user_id, "I drive a bike to work")
    second = (
        await client.patch(
            f"/v1/users/{user_id}/memories/{first['id']}", json={"content": "I drive a car"}
        )
    ).json()
    third = (
        await client.patch(
            f"/v1/users/{user_id}/memories/{second['version_id']}",
            json={"content": "I drive a van"},
        )
    ).json()
    response = await client.patch(
        f"/v1/users/{user_id}/memories/{second['version_id']}", json={"content": "I walk"}
    )
    assert response.status_code == 200, response.text
    walked = response.json()
    assert (walked["id"], walked["version"], walked["replaces_id"]) == (
        first["id"],
        4,
        third["version_id"],
    )


async def test_an_empty_patch_is_rejected_and_makes_no_version(client, user_id) -> None:
    memory = await create_memory(client, user_id, "I keep bees")
    response = await client.patch(f"/v1/users/{user_id}/memories/{memory['id']}", json={})
    assert response.status_code == 400
    assert response.headers["content-type"].startswith("application/problem+json")
    assert "at least one field" in response.json()["detail"]
    history = (await client.get(f"/v1/users/{user_id}/memories/{memory['id']}/history")).json()
    assert [v["version_id"] for v in history["versions"]] == [memory["version_id"]]


async def test_new_content_keeps_its_category_unless_asked_to_classify_again(
    client, user_id
) -> None:
    created = await client.post(
        f"/v1/users/{user_id}/memories", json={"content": "I play the violin in an orchestra"}
    )
    assert created.status_code == 201, created.text
    memory = created.json()
    assert memory["category"] == "hobbies"
    # New content alone never changes the category behind the caller's back.
    changed = await client.patch(
        f"/v1/users/{user_id}/memories/{memory['id']}",
        json={"content": "I'm allergic to shellfish"},
    )
    assert changed.status_code == 200, changed.text
    assert changed.json()["category"] == "hobbies"
    # An explicit null asks the classifier again, and the response shows its choice.
    asked = await client.patch(
        f"/v1/users/{user_id}/memories/{changed.json()['id']}",
        json={"content": "I'm allergic to shellfish", "category": None},
    )
    assert asked.status_code == 200, asked.text
    assert asked.json()["category"] == "dietary"
    # A category given with the new content is kept as given.
    kept = await client.patch(
        f"/v1/users/{user_id}/memories/{asked.json()['id']}",
        json={"content": "I'm allergic to shellfish and peanuts", "category": "health"},
    )
    assert kept.json()["category"] == "health"


async def test_list_filters_and_cursor_pagination(client, user_id) -> None:
    batch = await client.post(
        f"/v1/users/{user_id}/memories/batch",
        json={
            "memories": [{"content": f"Fact number {i}", "category": "hobbies"} for i in range(5)]
            + [
                {"content": "Meeting notes for today", "scope": "CONTEXT", "session_id": "s-1"},
                {"content": "I prefer tea", "category": "preferences"},
            ]
        },
    )
    assert batch.status_code == 201, batch.text
    assert len(batch.json()["items"]) == 7

    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        params = {"limit": 3, "category": "hobbies"}
        if cursor:
            params["cursor"] = cursor
        page = (await client.get(f"/v1/users/{user_id}/memories", params=params)).json()
        seen += [m["content"] for m in page["items"]]
        pages += 1
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert pages == 2
    assert sorted(seen) == [f"Fact number {i}" for i in range(5)]

    context = (
        await client.get(f"/v1/users/{user_id}/memories", params={"scope": "CONTEXT"})
    ).json()
    assert [m["content"] for m in context["items"]] == ["Meeting notes for today"]
    by_session = (
        await client.get(f"/v1/users/{user_id}/memories", params={"session_id": "s-1"})
    ).json()
    assert [m["session_id"] for m in by_session["items"]] == ["s-1"]
