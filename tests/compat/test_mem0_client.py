"""mem0's official client (`mem0ai`'s MemoryClient, installed from the package index, not a
copy) against the real API process: each call of the compatibility surface (app/api/mem0/),
and its effects read back through this service's own API."""

from __future__ import annotations

import os

# Before mem0 is imported: its telemetry would try the network.
os.environ["MEM0_TELEMETRY"] = "false"

import asyncio
import uuid
from collections.abc import Iterator

import httpx
import pytest
from mem0 import AsyncMemoryClient, MemoryClient
from mem0.exceptions import MemoryNotFoundError, ValidationError

from tests.compat.clients import mem0_of, native_of
from tests.conftest import ADMIN_KEY, API_KEY, ApiProcess
from tests.doc_blocks import one_run_by


@pytest.fixture
def mem0(api: ApiProcess) -> Iterator[MemoryClient]:
    with mem0_of(api) as client:
        yield client


@pytest.fixture
def native(api: ApiProcess) -> Iterator[httpx.Client]:
    with native_of(api) as http:
        yield http


def _plain(mem0: MemoryClient, user_id: str, text: str, **kwargs) -> str:
    """One memory stored as given (infer=False); its id."""
    added = mem0.add(text, user_id=user_id, infer=False, **kwargs)
    (event,) = added["results"]
    assert (event["event"], event["memory"]) == ("ADD", text)
    return event["id"]


def test_construction_pings_with_the_token_and_learns_the_tenant(
    mem0: MemoryClient, api: ApiProcess
) -> None:
    assert mem0.org_id is not None and mem0.org_id == mem0.project_id
    with pytest.raises(ValueError, match="API key"):
        MemoryClient(api_key="not-a-key", host=api.url)


def test_add_with_infer_runs_ingestion_and_returns_its_events(
    mem0: MemoryClient, native: httpx.Client, user_id: str
) -> None:
    added = mem0.add(
        [{"role": "user", "content": "I moved to Lisbon last year and I am allergic to peanuts."}],
        user_id=user_id,
        agent_id="travel-bot",
        metadata={"source": "onboarding"},
    )
    assert added["results"], added
    assert {e["event"] for e in added["results"]} == {"ADD"}
    for event in added["results"]:
        stored = native.get(f"/v1/users/{user_id}/memories/{event['id']}").json()
        assert stored["content"] == event["memory"]
        assert stored["agent_id"] == "travel-bot"
        assert stored["metadata"]["source"] == "onboarding"


def test_add_async_mode_is_queued_then_done(
    mem0: MemoryClient, native: httpx.Client, user_id: str
) -> None:
    added = mem0.add("I play the cello every Sunday.", user_id=user_id, async_mode=True)
    (queued,) = added["results"]
    assert queued["status"] == "PENDING"
    job = native.get(f"/v1/users/{user_id}/jobs/{queued['event_id']}")
    assert job.status_code == 200 and job.json()["user_id"] == user_id


def test_add_without_infer_stores_each_message(
    mem0: MemoryClient, native: httpx.Client, user_id: str
) -> None:
    added = mem0.add(
        [
            {"role": "user", "content": "Ines prefers window seats."},
            {"role": "assistant", "content": "Noted: window seats for Ines."},
        ],
        user_id=user_id,
        run_id="trip-7",
        metadata={"topic": "travel"},
        infer=False,
    )
    assert [e["memory"] for e in added["results"]] == [
        "Ines prefers window seats.",
        "Noted: window seats for Ines.",
    ]
    listed = native.get(f"/v1/users/{user_id}/memories").json()["items"]
    assert sorted(m["content"] for m in listed) == sorted(e["memory"] for e in added["results"])
    assert {(m["run_id"], m["metadata"]["topic"]) for m in listed} == {("trip-7", "travel")}


def test_get_returns_mem0s_memory(mem0: MemoryClient, user_id: str) -> None:
    memory_id = _plain(mem0, user_id, "Ines lives in Tokyo.", metadata={"k": 1})
    got = mem0.get(memory_id)
    assert (got["id"], got["user_id"]) == (memory_id, user_id)
    assert got["memory"] == "Ines lives in Tokyo."
    assert got["metadata"] == {"k": 1} and isinstance(got["categories"], list)
    with pytest.raises(MemoryNotFoundError):
        mem0.get(str(uuid.uuid4()))


def test_search_finds_by_meaning_within_filters(mem0: MemoryClient, user_id: str) -> None:
    cello = _plain(mem0, user_id, "Ines plays the cello in an orchestra.", agent_id="a1")
    _plain(mem0, user_id, "Ines's car is a red hatchback.", agent_id="a2")
    found = mem0.search("What instrument does Ines play?", filters={"user_id": user_id}, top_k=1)
    assert [r["id"] for r in found["results"]] == [cello]
    assert isinstance(found["results"][0]["score"], float)
    only_a2 = mem0.search(
        "What instrument does Ines play?",
        filters={"AND": [{"user_id": user_id}, {"agent_id": "a2"}]},
    )
    assert cello not in [r["id"] for r in only_a2["results"]]


def test_get_all_filters_and_pages(mem0: MemoryClient, user_id: str) -> None:
    ids = [_plain(mem0, user_id, f"Ines owns {n} bicycles.", metadata={"n": n}) for n in range(3)]
    everything = mem0.get_all(filters={"user_id": user_id})
    assert everything["count"] == 3
    assert sorted(m["id"] for m in everything["results"]) == sorted(ids)
    page = mem0.get_all(filters={"user_id": user_id}, page=2, page_size=2)
    assert page["count"] == 3 and len(page["results"]) == 1 and page["next"] is None
    one = mem0.get_all(filters={"AND": [{"user_id": user_id}, {"metadata": {"n": 1}}]})
    assert [m["id"] for m in one["results"]] == [ids[1]]


def test_update_changes_text_and_keeps_the_id(
    mem0: MemoryClient, native: httpx.Client, user_id: str
) -> None:
    memory_id = _plain(mem0, user_id, "Ines lives in Tokyo.")
    updated = mem0.update(memory_id, text="Ines lives in Osaka.", metadata={"moved": True})
    assert (updated["id"], updated["memory"]) == (memory_id, "Ines lives in Osaka.")
    again = mem0.update(memory_id, metadata={"moved": "twice"})
    assert again["memory"] == "Ines lives in Osaka." and again["metadata"] == {"moved": "twice"}
    (current,) = native.get(f"/v1/users/{user_id}/memories").json()["items"]
    assert (current["chain_id"], current["version"]) == (memory_id, 3)
    assert (current["content"], current["metadata"]) == ("Ines lives in Osaka.", {"moved": "twice"})


def test_history_lists_every_version(mem0: MemoryClient, user_id: str) -> None:
    memory_id = _plain(mem0, user_id, "Ines lives in Tokyo.")
    mem0.update(memory_id, text="Ines lives in Osaka.")
    mem0.delete(memory_id)
    history = mem0.history(memory_id)
    assert [(h["event"], h["old_memory"], h["new_memory"]) for h in history] == [
        ("ADD", None, "Ines lives in Tokyo."),
        ("UPDATE", "Ines lives in Tokyo.", "Ines lives in Osaka."),
        ("DELETE", "Ines lives in Osaka.", None),
    ]
    assert {h["memory_id"] for h in history} == {memory_id}


def test_delete_removes_it_from_search_listing_and_get(mem0: MemoryClient, user_id: str) -> None:
    memory_id = _plain(mem0, user_id, "Ines is allergic to shellfish.")
    assert mem0.delete(memory_id)["message"]
    found = mem0.search("What is Ines allergic to?", filters={"user_id": user_id})
    assert memory_id not in [r["id"] for r in found["results"]]
    assert mem0.get_all(filters={"user_id": user_id})["count"] == 0
    with pytest.raises(MemoryNotFoundError, match="deleted"):
        mem0.get(memory_id)
    assert [h["event"] for h in mem0.history(memory_id)] == ["ADD", "DELETE"]


def test_threshold_and_score_are_on_mem0s_scale(
    mem0: MemoryClient, native: httpx.Client, user_id: str
) -> None:
    """score is the square root of the relevance, threshold asks for its square: the right
    answer passes mem0's habitual 0.5, an unrelated memory does not."""
    cello = _plain(mem0, user_id, "Ines plays the cello in an orchestra.")
    _plain(mem0, user_id, "The office kitchen got a new espresso machine.")
    question = "What instrument does Ines play?"
    relevance = {
        hit["memory"]["chain_id"]: hit["relevance"]
        for hit in native.post(
            f"/v1/users/{user_id}/search",
            json={"query": question, "consistency": "indexed", "min_relevance": 0},
        ).json()["results"]
    }
    found = mem0.search(question, filters={"user_id": user_id}, threshold=0.5)
    assert [r["id"] for r in found["results"]] == [cello], relevance
    assert found["results"][0]["score"] == pytest.approx(relevance[cello] ** 0.5, abs=0.01)
    assert mem0.search(question, filters={"user_id": user_id}, threshold=0.99)["results"] == []
    with pytest.raises(ValidationError, match="threshold"):
        mem0.search(question, filters={"user_id": user_id}, threshold=5)


def test_delete_all_by_user_and_by_run(mem0: MemoryClient, user_id: str) -> None:
    kept = _plain(mem0, user_id, "Ines speaks Portuguese.")
    _plain(mem0, user_id, "Ines booked seat 12A.", run_id="trip-1")
    mem0.delete_all(user_id=user_id, run_id="trip-1")
    assert [m["id"] for m in mem0.get_all(filters={"user_id": user_id})["results"]] == [kept]
    mem0.delete_all(user_id=user_id)
    assert mem0.get_all(filters={"user_id": user_id})["count"] == 0
    assert [h["event"] for h in mem0.history(kept)] == ["ADD", "DELETE"]  # superseded, kept


def test_batch_update_and_batch_delete(mem0: MemoryClient, user_id: str) -> None:
    first = _plain(mem0, user_id, "Ines has one cat.")
    second = _plain(mem0, user_id, "Ines has one dog.")
    updated = mem0.batch_update(
        [
            {"memory_id": first, "text": "Ines has two cats."},
            {"memory_id": second, "text": "Ines has two dogs."},
        ]
    )
    assert "2" in updated["message"]
    assert {mem0.get(first)["memory"], mem0.get(second)["memory"]} == {
        "Ines has two cats.",
        "Ines has two dogs.",
    }
    mem0.batch_delete([{"memory_id": first}, {"memory_id": second}])
    assert mem0.get_all(filters={"user_id": user_id})["count"] == 0


def test_another_users_memories_are_invisible(
    mem0: MemoryClient, user_id: str, other_user_id: str
) -> None:
    secret = _plain(mem0, user_id, "Ines's locker code is 4711.")
    found = mem0.search("locker code", filters={"user_id": other_user_id})
    assert found["results"] == []
    assert mem0.get_all(filters={"user_id": other_user_id})["count"] == 0
    assert secret in [m["id"] for m in mem0.get_all(filters={"user_id": user_id})["results"]]


def test_another_tenants_key_cannot_reach_a_memory(
    mem0: MemoryClient, api: ApiProcess, user_id: str
) -> None:
    secret = _plain(mem0, user_id, "Ines's locker code is 4711.")
    with httpx.Client(base_url=api.url, headers={"X-API-Key": ADMIN_KEY}, timeout=60) as admin:
        name = f"mem0-{uuid.uuid4().hex[:8]}"
        assert admin.post("/admin/v1/tenants", json={"name": name}).status_code == 201
        key = admin.post(f"/admin/v1/tenants/{name}/keys", json={"name": "k"}).json()["key"]
    stranger = MemoryClient(api_key=key, host=api.url)
    for call in (
        lambda: stranger.get(secret),
        lambda: stranger.update(secret, text="hacked"),
        lambda: stranger.delete(secret),
        lambda: stranger.history(secret),
    ):
        with pytest.raises(MemoryNotFoundError):
            call()
    assert stranger.get_all(filters={"user_id": user_id})["count"] == 0
    assert mem0.get(secret)["memory"] == "Ines's locker code is 4711."


async def test_the_async_client_adds_searches_lists_and_changes(
    api: ApiProcess, user_id: str
) -> None:
    """mem0's AsyncMemoryClient: the same routes, awaited. Its constructor pings the key with
    a blocking request (requests.get), so it is built in a thread, off the event loop."""
    client = await asyncio.to_thread(AsyncMemoryClient, api_key=API_KEY, host=api.url)
    assert client.org_id is not None
    async with client:
        added = await client.add("Ines keeps bees on the roof.", user_id=user_id, infer=False)
        (event,) = added["results"]
        assert (event["event"], event["memory"]) == ("ADD", "Ines keeps bees on the roof.")
        bees = event["id"]
        inferred = await client.add(
            [{"role": "user", "content": "I moved to Porto last spring."}],
            user_id=user_id,
            agent_id="travel-bot",
        )
        assert [e["event"] for e in inferred["results"]] == ["ADD"]
        porto = inferred["results"][0]["id"]

        found = await client.search("Who keeps bees?", filters={"user_id": user_id}, top_k=1)
        assert [r["id"] for r in found["results"]] == [bees]
        listed = await client.get_all(filters={"user_id": user_id})
        assert listed["count"] == 2 and {m["id"] for m in listed["results"]} == {bees, porto}
        of_the_bot = await client.get_all(
            filters={"AND": [{"user_id": user_id}, {"agent_id": "travel-bot"}]}
        )
        assert [m["id"] for m in of_the_bot["results"]] == [porto]

        updated = await client.update(bees, text="Ines keeps bees and hens on the roof.")
        assert (updated["id"], updated["memory"]) == (bees, "Ines keeps bees and hens on the roof.")
        assert (await client.get(bees))["memory"] == "Ines keeps bees and hens on the roof."
        assert [h["event"] for h in await client.history(bees)] == ["ADD", "UPDATE"]
        await client.delete(porto)
        with pytest.raises(ValidationError):  # deleted: no current version to change (409)
            await client.update(porto, text="Ines moved to Braga.")
        await client.delete_all(user_id=user_id)
        assert (await client.get_all(filters={"user_id": user_id}))["count"] == 0
    # Read back through the native API: superseded, history kept.
    async with httpx.AsyncClient(base_url=api.url, headers={"X-API-Key": API_KEY}) as native:
        history = (await native.get(f"/v1/users/{user_id}/memories/{bees}/history")).json()
    assert [v["is_current"] for v in history["versions"]] == [False, False]


def test_bad_filters_are_a_400_that_says_what_to_do(mem0: MemoryClient) -> None:
    with pytest.raises(ValidationError, match="exactly one user"):
        mem0.search("anything", filters={"agent_id": "a1"})
    with pytest.raises(ValidationError, match="app_id"):
        mem0.search("anything", filters={"AND": [{"user_id": "u"}, {"app_id": "x"}]})


def test_the_snippet_of_docs_mem0_runs_as_written(
    api: ApiProcess, native: httpx.Client, user_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    page = "docs/mem0.md"
    snippet = one_run_by(__file__, page, "MemoryClient(")
    monkeypatch.setenv("COGNIS_API_KEY", API_KEY)
    code = snippet.replace("http://localhost:8000", api.url).replace('"alice"', repr(user_id))
    names: dict[str, object] = {}
    exec(compile(code, page, "exec"), names)  # noqa: S102
    memory_id = names["memory_id"]
    listed = native.get(f"/v1/users/{user_id}/memories").json()["items"]
    assert ("Alice lives in Porto.", 2) in [
        (m["content"], m["version"]) for m in listed if m["chain_id"] == memory_id
    ]
