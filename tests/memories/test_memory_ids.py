"""Memory ids that last (issue 41, item 2): a memory keeps its id across updates and its
delete, each version has its own version id, and If-Match makes a write conditional on the
version the client read (412 when another writer replaced it)."""

from __future__ import annotations

import asyncio

from tests.factories import create_memory, search


def _path(user_id: str, memory_id: str = "") -> str:
    return f"/v1/users/{user_id}/memories/{memory_id}".rstrip("/")


async def _patch(client, user_id: str, memory_id: str, content: str, **headers: str) -> dict:
    response = await client.patch(
        _path(user_id, memory_id), json={"content": content}, headers=headers
    )
    assert response.status_code == 200, response.text
    return response.json()


async def test_an_id_kept_from_create_patches_and_deletes_after_two_updates(
    client, user_id
) -> None:
    created = await create_memory(client, user_id, "I have one bike")
    kept = created["id"]
    assert created["version_id"] == kept  # version 1's id is the memory's
    second = await _patch(client, user_id, kept, "I have two bikes")
    third = await _patch(client, user_id, kept, "I have three bikes")
    assert [second["id"], third["id"]] == [kept, kept]
    assert [second["chain_id"], third["chain_id"]] == [kept, kept]  # the deprecated alias
    assert len({created["version_id"], second["version_id"], third["version_id"]}) == 3
    assert [second["replaces_id"], third["replaces_id"]] == [kept, second["version_id"]]
    assert third["version"] == 3

    read = await client.get(_path(user_id, kept))
    assert read.status_code == 200, read.text
    assert read.json()["version_id"] == third["version_id"]
    assert read.headers["etag"] == f'"{third["version_id"]}"'

    deleted = await client.delete(_path(user_id, kept))
    assert deleted.status_code == 200, deleted.text
    ended = deleted.json()
    assert (ended["id"], ended["version_id"], ended["is_current"]) == (
        kept,
        third["version_id"],
        False,
    )
    # A deleted memory reads as its last version, ended; writes to it are refused.
    after = (await client.get(_path(user_id, kept))).json()
    assert (after["version_id"], after["is_current"]) == (third["version_id"], False)
    assert after["superseded_at"] is not None
    for refused in (
        await client.patch(_path(user_id, kept), json={"content": "I have four bikes"}),
        await client.delete(_path(user_id, kept)),
    ):
        assert refused.status_code == 409, refused.text
        assert "deleted" in refused.json()["detail"]
    listed = (await client.get(_path(user_id))).json()["items"]
    assert listed == []


async def test_an_old_version_id_names_the_memory_for_writes_and_itself_for_reads(
    client, user_id
) -> None:
    created = await create_memory(client, user_id, "I live in Lyon")
    second = await _patch(client, user_id, created["id"], "I live in Nantes")
    third = await _patch(client, user_id, created["id"], "I live in Rennes")

    # PATCH by an id handed out before the memory changed: it acts on the current version.
    fourth = await _patch(client, user_id, second["version_id"], "I live in Brest")
    assert (fourth["id"], fourth["version"], fourth["replaces_id"]) == (
        created["id"],
        4,
        third["version_id"],
    )
    # GET by a version's id is that version, as it was: history stays addressable.
    old = await client.get(_path(user_id, second["version_id"]))
    assert old.status_code == 200, old.text
    assert (old.json()["content"], old.json()["is_current"]) == ("I live in Nantes", False)
    assert old.headers["etag"] == f'"{second["version_id"]}"'

    deleted = await client.delete(_path(user_id, third["version_id"]))
    assert deleted.status_code == 200, deleted.text
    assert deleted.json()["version_id"] == fourth["version_id"]


async def test_history_is_the_same_by_the_memory_id_and_by_any_version_id(client, user_id) -> None:
    created = await create_memory(client, user_id, "I read one book a month")
    second = await _patch(client, user_id, created["id"], "I read two books a month")
    third = await _patch(client, user_id, created["id"], "I read three books a month")
    histories = [
        (await client.get(f"{_path(user_id, any_id)}/history")).json()
        for any_id in (created["id"], second["version_id"], third["version_id"])
    ]
    assert histories[0] == histories[1] == histories[2]
    history = histories[0]
    assert history["id"] == history["chain_id"] == created["id"]
    assert [v["id"] for v in history["versions"]] == [created["id"]] * 3
    assert [v["version_id"] for v in history["versions"]] == [
        created["version_id"],
        second["version_id"],
        third["version_id"],
    ]


async def test_if_match_refuses_a_stale_version_with_412_and_takes_a_fresh_one(
    client, user_id
) -> None:
    created = await create_memory(client, user_id, "My favourite tea is green")
    read = await client.get(_path(user_id, created["id"]))
    etag = read.headers["etag"]
    # Another writer changes the memory after this client read it.
    theirs = await _patch(client, user_id, created["id"], "My favourite tea is oolong")

    stale = await client.patch(
        _path(user_id, created["id"]), json={"content": "Mine is black"}, headers={"If-Match": etag}
    )
    assert stale.status_code == 412, stale.text
    assert stale.headers["content-type"].startswith("application/problem+json")
    problem = stale.json()
    assert (problem["current_version_id"], problem["memory_id"]) == (
        theirs["version_id"],
        created["id"],
    )
    assert theirs["version_id"] in problem["detail"]
    refused = await client.delete(_path(user_id, created["id"]), headers={"If-Match": etag})
    assert refused.status_code == 412, refused.text
    history = (await client.get(f"{_path(user_id, created['id'])}/history")).json()
    assert [v["version"] for v in history["versions"]] == [1, 2]  # nothing written

    # The version now current, as its ETag (quoted), unquoted, weak, or among several.
    fresh = await client.patch(
        _path(user_id, created["id"]),
        json={"content": "My favourite tea is black"},
        headers={"If-Match": f'"{theirs["version_id"]}"'},
    )
    assert fresh.status_code == 200, fresh.text
    assert fresh.headers["etag"] == f'"{fresh.json()["version_id"]}"'
    for form in ("{}", 'W/"{}"'):
        tag = form.format(fresh.json()["version_id"])
        response = await client.patch(
            _path(user_id, created["id"]),
            json={"metadata": {"tag": tag}},
            headers={"If-Match": tag},
        )
        assert response.status_code == 200, (tag, response.text)
        fresh = response
    several = f'"{created["version_id"]}", "{fresh.json()["version_id"]}"'
    response = await client.patch(
        _path(user_id, created["id"]), json={"speaker": "me"}, headers={"If-Match": several}
    )
    assert response.status_code == 200, response.text
    anything = await client.patch(
        _path(user_id, created["id"]), json={"speaker": "you"}, headers={"If-Match": "*"}
    )
    assert anything.status_code == 200, anything.text
    garbled = await client.patch(
        _path(user_id, created["id"]), json={"speaker": "us"}, headers={"If-Match": "latest"}
    )
    assert garbled.status_code == 400, garbled.text
    assert garbled.json()["field"] == "If-Match"

    ended = await client.delete(
        _path(user_id, created["id"]), headers={"If-Match": anything.headers["etag"]}
    )
    assert ended.status_code == 200, ended.text
    assert ended.json()["version_id"] == anything.json()["version_id"]


async def test_another_users_memory_id_is_not_found(client, user_id, other_user_id) -> None:
    theirs = await create_memory(client, other_user_id, "I collect stamps")
    moved = await _patch(client, other_user_id, theirs["id"], "I collect coins")
    for any_id in (theirs["id"], moved["version_id"]):
        for response in (
            await client.get(_path(user_id, any_id)),
            await client.get(f"{_path(user_id, any_id)}/history"),
            await client.patch(_path(user_id, any_id), json={"content": "Mine now"}),
            await client.patch(
                _path(user_id, any_id),
                json={"content": "Mine now"},
                headers={"If-Match": moved["version_id"]},
            ),
            await client.delete(_path(user_id, any_id)),
        ):
            assert response.status_code == 404, response.text
    owned = (await client.get(_path(other_user_id, theirs["id"]))).json()
    assert (owned["version_id"], owned["is_current"]) == (moved["version_id"], True)


async def test_lists_searches_context_and_profile_carry_the_lasting_id(client, user_id) -> None:
    created = await create_memory(
        client, user_id, "I work as a nurse in Lisbon", category="professional"
    )
    moved = await _patch(client, user_id, created["id"], "I work as a nurse in Porto")

    listed = (await client.get(_path(user_id))).json()["items"]
    assert [(m["id"], m["version_id"]) for m in listed] == [(created["id"], moved["version_id"])]
    every = (await client.get(_path(user_id), params={"include_superseded": "true"})).json()
    assert {m["id"] for m in every["items"]} == {created["id"]}
    assert len({m["version_id"] for m in every["items"]}) == 2
    # A short id finds the memory by its own id, or by a later version's.
    for prefix in (created["id"][:8], moved["version_id"][:8]):
        found = (await client.get(_path(user_id), params={"id_prefix": prefix})).json()
        assert [m["id"] for m in found["items"]] == [created["id"]], prefix

    found = await search(
        client, user_id, "where do I work as a nurse", consistency="indexed", top_k=3
    )
    (hit,) = [h for h in found["results"] if h["history_of"] is None]
    assert (hit["memory"]["id"], hit["memory"]["version_id"]) == (
        created["id"],
        moved["version_id"],
    )
    earlier = await search(
        client, user_id, "where did I use to work before", consistency="indexed", top_k=3
    )
    history = [h for h in earlier["results"] if h["history_of"] is not None]
    assert [(h["history_of"], h["memory"]["id"]) for h in history] == [
        (created["id"], created["id"])
    ]

    block = (await client.post(f"/v1/users/{user_id}/context", json={})).json()
    (cited,) = block["cited"]
    assert (cited["id"], cited["chain_id"], cited["version_id"], cited["replaced_id"]) == (
        created["id"],
        created["id"],
        moved["version_id"],
        created["version_id"],
    )
    profile = (await client.get(f"/v1/users/{user_id}/profile")).json()
    (fact,) = profile["categories"][0]["memories"]
    assert (fact["memory"]["id"], fact["replaced"]["version_id"]) == (
        created["id"],
        created["version_id"],
    )


async def test_concurrent_writers_win_in_turn_unless_if_match_names_the_version(
    client, user_id
) -> None:
    memory = await create_memory(client, user_id, "I have one cat")
    # Without If-Match: every update applies, each to the version current when it is written.
    responses = await asyncio.gather(
        *(
            client.patch(_path(user_id, memory["id"]), json={"content": f"I have {n} cats"})
            for n in range(2, 6)
        )
    )
    assert [r.status_code for r in responses] == [200] * 4, [r.text for r in responses]
    history = (await client.get(f"{_path(user_id, memory['id'])}/history")).json()["versions"]
    assert [v["version"] for v in history] == [1, 2, 3, 4, 5]
    assert [v["replaces_id"] for v in history] == [None, *(v["version_id"] for v in history[:-1])]
    assert [v["is_current"] for v in history] == [False] * 4 + [True]

    # With If-Match on the version all of them read: one wins, the others are told it changed.
    read = history[-1]["version_id"]
    responses = await asyncio.gather(
        *(
            client.patch(
                _path(user_id, memory["id"]),
                json={"content": f"I have {n} dogs"},
                headers={"If-Match": read},
            )
            for n in range(2, 6)
        )
    )
    assert sorted(r.status_code for r in responses) == [200, 412, 412, 412]
    (winner,) = (r.json() for r in responses if r.status_code == 200)
    assert {r.json()["current_version_id"] for r in responses if r.status_code == 412} == {
        winner["version_id"]
    }
