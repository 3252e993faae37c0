"""The leak suite: two tenants, each with the same two user ids, over every endpoint and both
stores. Nothing of one tenant is read, changed, found, erased or blocked by the other."""

from __future__ import annotations

import json
import uuid
from contextlib import AsyncExitStack

import httpx
import pytest
from sqlalchemy import text

from app.config import Settings
from app.db.tenant import tenant_scope
from app.memories.filters import to_opensearch, visible_to
from app.search_index.client import MemoryIndex
from tests.conftest import API_KEY, InProcessApi, wait_until
from tests.factories import indexed_document, search, stage_rank
from tests.imports.helpers import NDJSON, jsonl
from tests.tenants.helpers import TenantKey, new_tenant, tenant_client

pytestmark = pytest.mark.usefixtures("ingest_worker")  # messages through the in-process API

USERS = ("alice", "bob")
AGENT, RUN = "planner", "run-1"
# What the agent's and run's own memories are, as a filter.
AGENTS_OWN = {
    "and": [
        {"field": "agent", "op": "eq", "value": AGENT},
        {"field": "run", "op": "in", "value": [RUN]},
    ]
}
# What that agent and run see, as the BM25 leg's query clause.
AGENT_SCOPE = to_opensearch(visible_to(AGENT, RUN))
# A filter every memory matches.
EVERYTHING = {
    "or": [
        {"field": "metadata.x", "op": "exists", "value": False},
        {"not": {"field": "metadata.x", "op": "exists", "value": False}},
    ]
}


def word(tenant: str, user: str) -> str:
    """A made-up word only this tenant's user stores: a BM25 hit on it can only be theirs."""
    return f"zq{tenant}{user}{uuid.uuid4().hex[:6]}"


async def _write_everything(http: httpx.AsyncClient, user: str, secret: str) -> dict:
    """One of each write: a memory, a batch, messages (ingested), an import."""
    made = await http.post(
        f"/v1/users/{user}/memories",
        json={
            "content": f"My locker code word is {secret}",
            "category": "personal_details",
            # The same agent and run in every tenant and user.
            "agent_id": AGENT,
            "run_id": RUN,
        },
    )
    assert made.status_code == 201, made.text
    batch = await http.post(
        f"/v1/users/{user}/memories/batch",
        json={"memories": [{"content": f"I collect stamps named {secret}stamp"}]},
    )
    assert batch.status_code == 201, batch.text
    # The same idempotency key in both tenants: each stores its own message.
    submitted = await http.post(
        f"/v1/users/{user}/messages",
        params={"wait": "true"},
        json={
            "messages": [
                {
                    "content": f"I adopted a parrot called {secret}bird",
                    "idempotency_key": "m-1",
                    "agent_id": AGENT,
                }
            ]
        },
    )
    assert submitted.status_code == 200, submitted.text
    job = submitted.json()
    assert job["state"] == "done", job
    assert job["submitted"][0]["duplicate"] is False
    # The same external id in both tenants: each imports its own.
    imported = await http.post(
        f"/v1/users/{user}/import",
        content=jsonl([{"external_id": "ext-1", "content": f"I sail a boat named {secret}boat"}]),
        headers=NDJSON,
    )
    assert imported.status_code == 200, imported.text
    assert imported.json()["imported"] == 1, imported.text
    return {"memory": made.json(), "job_id": job["job_id"]}


async def test_two_tenants_with_the_same_users_never_meet(
    inprocess_api: InProcessApi,
    admin: httpx.AsyncClient,
    opensearch,
    index_name,
    service_urls,
    owner,
) -> None:
    tenants = {label: await new_tenant(admin, label) for label in ("ta", "tb")}
    async with AsyncExitStack() as stack:
        http = {
            label: await stack.enter_async_context(tenant_client(inprocess_api, t.key))
            for label, t in tenants.items()
        }
        secrets = {(t, u): word(t, u) for t in tenants for u in USERS}
        written = {
            (t, u): await _write_everything(http[t], u, secrets[t, u])
            for t in tenants
            for u in USERS
        }

        for (tenant, user), mine in written.items():
            own = http[tenant]
            other_label = next(t for t in tenants if t != tenant)
            other = http[other_label]
            theirs = written[other_label, user]  # the same user id in the other tenant

            # Reads: lists hold exactly this tenant's user's four memories.
            listed = (await own.get(f"/v1/users/{user}/memories")).json()["items"]
            contents = " ".join(m["content"] for m in listed)
            assert len(listed) == 4, listed
            assert secrets[tenant, user] in contents
            assert all(secrets[k] not in contents for k in secrets if k != (tenant, user))

            # By id, through the other tenant's key and the same user id: not found, unchanged.
            path = f"/v1/users/{user}/memories/{mine['memory']['id']}"
            for response in (
                await other.get(path),
                await other.get(f"{path}/history"),
                await other.patch(path, json={"content": "hijacked"}),
                await other.delete(path),
                await other.get(f"/v1/users/{user}/jobs/{mine['job_id']}"),
            ):
                assert response.status_code == 404, response.text
                assert response.headers["content-type"].startswith("application/problem+json")
            history = (await own.get(f"{path}/history")).json()["versions"]
            assert [v["is_current"] for v in history] == [True]
            assert (await own.get(f"/v1/users/{user}/jobs/{mine['job_id']}")).status_code == 200
            assert mine["job_id"] != theirs["job_id"]

            # Search, both legs: the own word is found by BM25; the other tenant's never is.
            found = await search(own, user, secrets[tenant, user], consistency="indexed", top_k=20)
            assert found["results"], found
            assert secrets[tenant, user] in found["results"][0]["memory"]["content"]
            assert stage_rank(found["results"][0], "bm25") == 1
            for key, secret in secrets.items():
                if key[0] == tenant:
                    continue
                leaked = await search(own, user, secret, consistency="indexed", top_k=50)
                assert all(secret not in r["memory"]["content"] for r in leaked["results"]), leaked

            # Filters narrow, never widen: a filter every memory matches (a tautology, in
            # both legs and the list) still finds nothing of the other tenant.
            for key, secret in secrets.items():
                if key[0] == tenant:
                    continue
                leaked = await search(
                    own, user, secret, consistency="indexed", top_k=50, filters=EVERYTHING
                )
                assert all(secret not in r["memory"]["content"] for r in leaked["results"])
            filtered = await own.get(
                f"/v1/users/{user}/memories", params={"filters": json.dumps(EVERYTHING)}
            )
            assert {m["id"] for m in filtered.json()["items"]} == {m["id"] for m in listed}

            # Agents and runs (the same ids in every tenant and user): an agent's search and
            # list see this tenant's user's memories only, in both legs.
            for key, secret in secrets.items():
                if key[0] == tenant:
                    continue
                leaked = await search(
                    own, user, secret, consistency="indexed", top_k=50, agent_id=AGENT, run_id=RUN
                )
                assert all(secret not in r["memory"]["content"] for r in leaked["results"])
            found = await search(
                own, user, secrets[tenant, user], consistency="indexed", agent_id=AGENT, run_id=RUN
            )
            assert stage_rank(found["results"][0], "bm25") == 1
            as_agent = await own.get(
                f"/v1/users/{user}/memories", params={"agent_id": AGENT, "run_id": RUN}
            )
            assert {m["id"] for m in as_agent.json()["items"]} == {m["id"] for m in listed}
            agents_own = await own.get(
                f"/v1/users/{user}/memories", params={"filters": json.dumps(AGENTS_OWN)}
            )
            assert [m["id"] for m in agents_own.json()["items"]] == [mine["memory"]["id"]]

            # The export: this tenant's user's four memories, whatever its filter or agent.
            for params in ({}, {"filters": json.dumps(EVERYTHING), "agent_id": AGENT}):
                exported = await own.get(f"/v1/users/{user}/export", params=params)
                assert exported.status_code == 200, exported.text
                lines = [json.loads(line) for line in exported.text.splitlines()]
                assert len(lines) == 4, lines
                assert secrets[tenant, user] in exported.text
                assert all(secrets[k] not in exported.text for k in secrets if k != (tenant, user))

            # The users list: exactly this tenant's users, counted in this tenant alone.
            users = (await own.get("/v1/users")).json()["items"]
            assert [(u["user_id"], u["memories"]) for u in users] == [(u, 4) for u in USERS]

            # The index: every document of this tenant carries it.
            document = await opensearch.get(index=index_name, id=mine["memory"]["id"])
            assert document["_source"]["tenant_id"] == tenants[tenant].tenant_id
            assert document["_source"]["user_id"] == user

        # OpenSearch itself filters by tenant (not only the Postgres read that follows).
        await _bm25_filters_by_tenant(service_urls.opensearch_url, index_name, tenants, secrets)

        # A scoped erase: tenant tb erases bob's agent; ta's bob (the same user and agent
        # ids), tb's alice and bob's shared memories keep everything, in both stores.
        await _erase_an_agent_in_one_tenant(
            http, tenants, written, secrets, opensearch, index_name, owner
        )

        # Erase: tenant tb erases alice; tenant ta's alice keeps everything, in both stores.
        erased = await http["tb"].delete("/v1/users/alice")
        assert erased.status_code == 200, erased.text
        assert erased.json()["postgres"]["memories"] == 4, erased.text
        assert erased.json()["opensearch_deleted"] == 4, erased.text
        assert (await http["tb"].get("/v1/users/alice/memories")).json()["items"] == []
        assert (await http["tb"].get("/v1/users/alice/export")).content == b""
        kept = (await http["ta"].get("/v1/users/alice/memories")).json()["items"]
        assert len(kept) == 4
        found = await search(http["ta"], "alice", secrets["ta", "alice"], consistency="indexed")
        assert stage_rank(found["results"][0], "bm25") == 1
        survivors = await opensearch.count(
            index=index_name,
            body={
                "query": {
                    "bool": {
                        "filter": [
                            {"term": {"tenant_id": tenants["ta"].tenant_id}},
                            {"term": {"user_id": "alice"}},
                        ]
                    }
                }
            },
        )
        assert survivors["count"] == 4

        # The default tenant (the settings' key) sees none of it either.
        await _default_tenant_sees_nothing(inprocess_api, secrets)


async def _erase_an_agent_in_one_tenant(
    http: dict[str, httpx.AsyncClient],
    tenants: dict[str, TenantKey],
    written: dict,
    secrets: dict,
    opensearch,
    index_name: str,
    owner,
) -> None:
    """Tenant tb erases agent AGENT of bob: its memory and its message's memory (the parrot)
    and the message go; nothing of ta's bob, of tb's alice or of bob's shared memories does."""
    erased = await http["tb"].delete("/v1/users/bob", params={"agent_id": AGENT})
    assert erased.status_code == 200, erased.text
    receipt = erased.json()
    assert receipt["postgres"]["memories"] == 2 and receipt["postgres"]["messages"] == 1, receipt
    assert receipt["opensearch_deleted"] == 2, receipt
    assert (
        await indexed_document(opensearch, index_name, written["tb", "bob"]["memory"]["id"]) is None
    )
    left = (await http["tb"].get("/v1/users/bob/memories")).json()["items"]
    assert len(left) == 2 and {m["agent_id"] for m in left} == {None}, left
    assert secrets["tb", "bob"] + "bird" not in (await http["tb"].get("/v1/users/bob/export")).text
    for (tenant, user), mine in written.items():
        if (tenant, user) == ("tb", "bob"):
            continue
        own = http[tenant]
        assert len((await own.get(f"/v1/users/{user}/memories")).json()["items"]) == 4
        assert await indexed_document(opensearch, index_name, mine["memory"]["id"]) is not None
        for leg in ({"vector": False}, {"bm25": False}):
            found = await search(
                own,
                user,
                f"My locker code word is {secrets[tenant, user]}",
                consistency="indexed",
                agent_id=AGENT,
                stages=leg,
                min_relevance=0,
            )
            assert mine["memory"]["id"] in {r["memory"]["id"] for r in found["results"]}, leg
    # The audit row is tb's alone.
    for label, tenant in tenants.items():
        async with owner.connect() as connection:
            await connection.execute(
                text("SELECT set_config('cognis.tenant_id', :t, false)"), {"t": tenant.tenant_id}
            )
            rows = (
                await connection.execute(text("SELECT user_id, agent_id FROM scope_erasures"))
            ).all()
        assert [tuple(r) for r in rows] == ([("bob", AGENT)] if label == "tb" else []), label


async def _default_tenant_sees_nothing(inprocess_api: InProcessApi, secrets: dict) -> None:
    async with tenant_client(inprocess_api, API_KEY) as legacy:
        for user in USERS:
            listed = (await legacy.get(f"/v1/users/{user}/memories")).json()["items"]
            contents = " ".join(m["content"] for m in listed)
            assert all(secret not in contents for secret in secrets.values())
            for secret in secrets.values():
                found = await search(legacy, user, secret, consistency="indexed", top_k=50)
                assert all(secret not in r["memory"]["content"] for r in found["results"])


async def _bm25_filters_by_tenant(
    opensearch_url: str, index_name: str, tenants: dict[str, TenantKey], secrets: dict
) -> None:
    index = MemoryIndex(
        Settings(
            database_url="postgresql+asyncpg://unused@127.0.0.1/unused",  # type: ignore[arg-type]
            opensearch_url=opensearch_url,
            opensearch_index=index_name,
        ).store
    )
    try:
        for (tenant, user), secret in secrets.items():
            for label, key in tenants.items():
                with tenant_scope(uuid.UUID(key.tenant_id)):
                    hits = await index.search_bm25(user, secret, 10)
                    # The agent's scope, compiled for the index, widens nothing either.
                    as_agent = await index.search_bm25(user, secret, 10, matching=AGENT_SCOPE)
                assert bool(hits) == (label == tenant), (label, tenant, user, hits)
                assert [h.memory_id for h in as_agent] == [h.memory_id for h in hits]
    finally:
        await index.close()


async def test_expiry_and_the_reaper_stay_in_their_tenant_and_user(
    inprocess_api: InProcessApi, admin: httpx.AsyncClient, owner, opensearch, index_name
) -> None:
    """The same user ids in two tenants: expiring one tenant's alice hides and reaps only her
    memory; the other tenant's alice, and bob, keep theirs in both stores; the audit row is
    seen by its own tenant only; no tenant can change another's expiry."""
    tenants = {label: await new_tenant(admin, label) for label in ("ea", "eb")}
    async with AsyncExitStack() as stack:
        http = {
            label: await stack.enter_async_context(tenant_client(inprocess_api, t.key))
            for label, t in tenants.items()
        }
        made: dict[tuple[str, str], dict] = {}
        for label in tenants:
            for user in USERS:
                response = await http[label].post(
                    f"/v1/users/{user}/memories",
                    json={"content": f"A note of {user} in {label}", "ttl_s": 3600},
                )
                assert response.status_code == 201, response.text
                made[label, user] = response.json()
        doomed = made["ea", "alice"]
        # Another tenant's key cannot touch it, expiry included.
        path = f"/v1/users/alice/memories/{doomed['id']}"
        hijack = await http["eb"].patch(path, json={"expires_at": None})
        assert hijack.status_code == 404, hijack.text
        await search(http["ea"], "alice", "note", consistency="indexed")
        await search(http["eb"], "alice", "note", consistency="indexed")

        async with owner.begin() as connection:
            await connection.execute(
                text(
                    "UPDATE memories SET expires_at = now() - interval '1 second' "
                    "WHERE tenant_id = CAST(:t AS uuid) AND id = CAST(:i AS uuid)"
                ),
                {"t": tenants["ea"].tenant_id, "i": doomed["id"]},
            )
        for (label, user), memory in made.items():
            listed = (await http[label].get(f"/v1/users/{user}/memories")).json()["items"]
            expected = [] if memory is doomed else [memory["id"]]
            assert [m["id"] for m in listed] == expected, (label, user)

        runtime = inprocess_api.app.state.runtime

        async def reaped():
            await runtime.reaper.reap_due()
            async with owner.connect() as connection:
                rows = await connection.execute(
                    text("SELECT tenant_id::text, user_id, chain_id::text FROM memory_expiries")
                )
                return [r for r in rows if r[0] in {t.tenant_id for t in tenants.values()}]

        audit = await wait_until(reaped)
        assert audit == [(tenants["ea"].tenant_id, "alice", doomed["chain_id"])]
        async with owner.connect() as connection:
            left = await connection.execute(
                text("SELECT id::text FROM memories WHERE tenant_id = ANY(CAST(:t AS uuid[]))"),
                {"t": [t.tenant_id for t in tenants.values()]},
            )
            assert sorted(r[0] for r in left) == sorted(
                m["id"] for m in made.values() if m is not doomed
            )

        async def document_gone():
            return await indexed_document(opensearch, index_name, doomed["id"]) is None

        await wait_until(document_gone)
        for memory in made.values():
            if memory is not doomed:
                assert await indexed_document(opensearch, index_name, memory["id"]) is not None
        # Row-level security: the audit row is its own tenant's.
        for label, tenant in tenants.items():
            async with owner.connect() as connection:
                await connection.execute(
                    text("SELECT set_config('cognis.tenant_id', :t, false)"),
                    {"t": tenant.tenant_id},
                )
                seen = (
                    await connection.execute(text("SELECT count(*) FROM memory_expiries"))
                ).scalar_one()
            assert seen == (1 if label == "ea" else 0), label
