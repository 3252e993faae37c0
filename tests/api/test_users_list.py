"""GET /v1/users: the tenant's users with memory counts and last change, paged, by prefix."""

from __future__ import annotations

import uuid
from contextlib import AsyncExitStack

import httpx

from tests.conftest import InProcessApi
from tests.tenants.helpers import new_tenant, tenant_client


async def test_users_are_listed_with_counts_paged_and_by_prefix(
    inprocess_api: InProcessApi, admin: httpx.AsyncClient
) -> None:
    async with AsyncExitStack() as stack:
        own = await stack.enter_async_context(
            tenant_client(inprocess_api, (await new_tenant(admin, "users")).key)
        )
        other = await stack.enter_async_context(
            tenant_client(inprocess_api, (await new_tenant(admin, "users")).key)
        )
        stem = f"ul{uuid.uuid4().hex[:6]}"
        counts = {f"{stem}-a": 3, f"{stem}-b": 1, f"{stem}-c": 2, f"x{stem}": 1}
        for user, count in counts.items():
            made = await own.post(
                f"/v1/users/{user}/memories/batch",
                json={"memories": [{"content": f"fact {i} of {user}"} for i in range(count)]},
            )
            assert made.status_code == 201, made.text
        # A version and a delete: counted as versions, not as current memories.
        first = (await own.get(f"/v1/users/{stem}-a/memories")).json()["items"][0]
        changed = await own.patch(
            f"/v1/users/{stem}-a/memories/{first['id']}", json={"content": "changed"}
        )
        assert changed.status_code == 200, changed.text
        gone = (await own.get(f"/v1/users/{stem}-c/memories")).json()["items"][0]
        deleted = await own.delete(f"/v1/users/{stem}-c/memories/{gone['id']}")
        assert deleted.status_code == 200, deleted.text
        # The same user id in another tenant: never counted or listed here.
        await other.post(f"/v1/users/{stem}-a/memories", json={"content": "elsewhere"})
        await other.post(f"/v1/users/{stem}-z/memories", json={"content": "elsewhere"})

        everyone = (await own.get("/v1/users")).json()
        assert [u["user_id"] for u in everyone["items"]] == sorted(counts)
        by_id = {u["user_id"]: u for u in everyone["items"]}
        assert (by_id[f"{stem}-a"]["memories"], by_id[f"{stem}-a"]["versions"]) == (3, 4)
        assert (by_id[f"{stem}-c"]["memories"], by_id[f"{stem}-c"]["versions"]) == (1, 2)
        assert by_id[f"{stem}-c"]["last_change"] >= by_id[f"{stem}-b"]["last_change"]
        assert everyone["next_cursor"] is None

        pages, cursor = [], None
        while True:
            params = {"prefix": stem, "limit": 2, **({"cursor": cursor} if cursor else {})}
            page = (await own.get("/v1/users", params=params)).json()
            pages.append([u["user_id"] for u in page["items"]])
            cursor = page["next_cursor"]
            if cursor is None:
                break
        assert pages == [[f"{stem}-a", f"{stem}-b"], [f"{stem}-c"]]

        theirs = (await other.get("/v1/users")).json()["items"]
        assert [(u["user_id"], u["memories"]) for u in theirs] == [
            (f"{stem}-a", 1),
            (f"{stem}-z", 1),
        ]
        bad = await own.get("/v1/users", params={"limit": 0})
        assert bad.status_code == 400
        assert bad.headers["content-type"].startswith("application/problem+json")


async def test_a_cursor_not_given_out_is_a_400(
    inprocess_api: InProcessApi, admin: httpx.AsyncClient
) -> None:
    """Issue 42, item 7: a garbage cursor was read as a user id to start after, silently giving
    another page. Only a next_cursor of this list leads on; anything else is a 400."""
    async with tenant_client(inprocess_api, (await new_tenant(admin, "cursor")).key) as own:
        stem = f"uc{uuid.uuid4().hex[:6]}"
        for user in (f"{stem}-a", f"{stem}-b"):
            for content in ("one fact", "another fact"):
                made = await own.post(f"/v1/users/{user}/memories", json={"content": content})
                assert made.status_code == 201, made.text
        first = (await own.get("/v1/users", params={"limit": 1})).json()
        assert [u["user_id"] for u in first["items"]] == [f"{stem}-a"]
        second = await own.get("/v1/users", params={"limit": 1, "cursor": first["next_cursor"]})
        assert [u["user_id"] for u in second.json()["items"]] == [f"{stem}-b"]

        memories = await own.get(f"/v1/users/{stem}-a/memories", params={"limit": 1})
        memory_cursor = memories.json()["next_cursor"]
        assert memory_cursor is not None
        for garbage in ("garbage", f"{stem}-a", "!!!!", "%%", "x" * 200, memory_cursor):
            refused = await own.get("/v1/users", params={"cursor": garbage})
            assert refused.status_code == 400, (garbage, refused.text)
            assert refused.headers["content-type"].startswith("application/problem+json")
            assert refused.json()["field"] == "cursor"
            assert "next_cursor" in refused.json()["detail"]
        # ... and a users cursor is no memory list's.
        crossed = await own.get(
            f"/v1/users/{stem}-a/memories", params={"cursor": first["next_cursor"]}
        )
        assert crossed.status_code == 400, crossed.text
        assert crossed.json()["field"] == "cursor"
