"""Two API processes behind one address (issue 35): what one process guarantees holds when two
share one Postgres database and one OpenSearch index, as two tasks behind a load balancer do.

Both processes run their own outbox relay and ingestion workers (on a queue of this module's
own). Requests reach them directly (`via_a`, `via_b`: which process answers is the point) or
through a round-robin proxy that gives each new connection to the next process (`balanced`:
one connection per request, so concurrent requests land on both)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from opensearchpy import AsyncOpenSearch
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.api.test_idempotency import (
    KINDS,
    REPLAYED,
    WRITES,
    count,
    new_key,
    prepare,
    send,
    writes,
    writes_held,
)
from tests.conftest import API_KEY, ApiProcess, wait_until
from tests.factories import (
    blocked_by,
    create_memory,
    indexed_document,
    search,
    stage_rank,
    user_row_counts,
)
from tests.ingest.helpers import decisions, ingest, message, rows, scalar, wait_job
from tests.scale.round_robin import RoundRobinProxy
from tests.test_erase import _write_until, assert_only_what_began_after_the_erase

pytestmark = pytest.mark.xdist_group("two_api_processes")

# The two processes' ingestion workers share this queue; no other process of the run works it.
QUEUE = "two-api-processes"
INDEXED = {"wait_for": "indexed"}


@pytest.fixture(scope="module")
def two_apis(migrated: dict[str, str]) -> Iterator[tuple[ApiProcess, ApiProcess]]:
    env = {**migrated, "COGNIS_INGEST_QUEUE": QUEUE}
    first, second = ApiProcess(env, "api-scale-a"), ApiProcess(env, "api-scale-b")
    try:
        first.wait_ready()  # both start at once; each waits for its own readiness
        second.wait_ready()
        yield first, second
    finally:
        first.stop()
        second.stop()


@pytest.fixture(scope="module")
def proxy(two_apis: tuple[ApiProcess, ApiProcess]) -> Iterator[RoundRobinProxy]:
    balancer = RoundRobinProxy(*(("127.0.0.1", api.port) for api in two_apis)).start()
    yield balancer
    balancer.stop()


@pytest.fixture
async def via_a(two_apis: tuple[ApiProcess, ApiProcess]) -> AsyncIterator[httpx.AsyncClient]:
    async with two_apis[0].client(timeout=120) as http:
        yield http


@pytest.fixture
async def via_b(two_apis: tuple[ApiProcess, ApiProcess]) -> AsyncIterator[httpx.AsyncClient]:
    async with two_apis[1].client(timeout=120) as http:
        yield http


@pytest.fixture
async def balanced(proxy: RoundRobinProxy) -> AsyncIterator[httpx.AsyncClient]:
    """The one address: a new connection (so the next process) for every request."""
    async with httpx.AsyncClient(
        base_url=proxy.url,
        headers={"X-API-Key": API_KEY},
        timeout=120,
        limits=httpx.Limits(max_keepalive_connections=0),
    ) as http:
        yield http


def spread_since(proxy: RoundRobinProxy, before: Counter) -> dict:
    """Connections each process was given since `before`; every process must have had some,
    or the test proved nothing about two of them."""
    given = proxy.served() - before
    assert len(given) == len(proxy.backends), f"requests reached only {dict(given)}"
    return dict(given)


def no_server_errors(responses: list[httpx.Response]) -> None:
    failed = [(r.status_code, r.text[:300]) for r in responses if r.status_code >= 500]
    assert not failed, failed


# --- Idempotency keys -------------------------------------------------------------------------


async def test_a_retry_through_the_other_process_replays_the_first_write(
    via_a: httpx.AsyncClient, via_b: httpx.AsyncClient, db: AsyncEngine, user_id: str
) -> None:
    headers = new_key()
    path = f"/v1/users/{user_id}/memories"
    body = {"content": "Ines keeps bees on the roof."}
    first = await via_a.post(path, json=body, headers=headers)
    assert first.status_code == 201, first.text
    assert REPLAYED not in first.headers

    retry = await via_b.post(path, json=body, headers=headers)
    assert (retry.status_code, retry.content) == (first.status_code, first.content)
    assert retry.headers[REPLAYED] == "true"
    assert await count(db, "memories", user_id) == 1
    listed = await via_b.get(path)
    assert listed.status_code == 200, listed.text
    assert [m["id"] for m in listed.json()["items"]] == [first.json()["id"]]
    # The key is the same request's on either process: another body under it is refused there.
    other = await via_b.post(path, json={"content": "Ines keeps wasps."}, headers=headers)
    assert other.status_code == 422 and other.json()["code"] == "idempotency_key_reused"


@pytest.mark.parametrize("kind", KINDS)
async def test_duplicates_racing_on_both_processes_write_once(
    via_a: httpx.AsyncClient,
    via_b: httpx.AsyncClient,
    db: AsyncEngine,
    user_id: str,
    kind: str,
) -> None:
    """Three copies of one keyed write to each process, all past their key check before any
    writes (the user's lock holds them just before their first row); released together, one
    process writes and every other copy answers its response."""
    method, path, body = await prepare(via_a, user_id, kind)
    before = await writes(db, user_id, kind)
    headers = new_key()
    async with writes_held(db, user_id) as holder:
        racing = [
            asyncio.create_task(send(http, method, path, body, headers))
            for http in (via_a, via_b, via_a, via_b, via_a, via_b)
        ]

        async def all_waiting() -> bool:
            return await blocked_by(holder) >= len(racing)

        await wait_until(all_waiting, timeout=60, interval=0.05)
    answers = await asyncio.gather(*racing)
    no_server_errors(answers)
    assert await writes(db, user_id, kind) == before + WRITES[kind]
    done = [r for r in answers if r.status_code != 409]
    originals = [r for r in done if REPLAYED not in r.headers]
    assert len(originals) == 1, [(r.status_code, dict(r.headers)) for r in answers]
    (original,) = originals
    assert original.status_code in (200, 201, 202), original.text
    assert {(r.status_code, r.content) for r in done} == {(original.status_code, original.content)}
    for busy in (r for r in answers if r.status_code == 409):
        # A message submission still answering: the copy is told to retry later, which then
        # gets the one response.
        assert kind == "messages", busy.text
        assert busy.json()["code"] == "idempotency_key_in_use"

    async def replayed_on_both() -> bool:
        again = await asyncio.gather(
            *(send(h, method, path, body, headers) for h in (via_a, via_b))
        )
        return all(
            r.headers.get(REPLAYED) == "true" and r.content == original.content for r in again
        )

    await wait_until(replayed_on_both, timeout=60, interval=0.5)
    assert await writes(db, user_id, kind) == before + WRITES[kind]


# --- Read-your-writes -------------------------------------------------------------------------


def codeword() -> str:
    """A word no other memory has: only this test's memory can be its BM25 hit."""
    return f"zx{uuid.uuid4().hex[:10]}"


async def test_a_write_waited_for_on_one_process_is_seen_by_the_other(
    via_a: httpx.AsyncClient, via_b: httpx.AsyncClient, user_id: str
) -> None:
    word = codeword()
    written = await via_a.post(
        f"/v1/users/{user_id}/memories",
        params=INDEXED,
        json={"content": f"My locker code word is {word}"},
    )
    assert written.status_code == 201, written.text
    assert written.headers["X-Index-State"] == "indexed"
    memory = written.json()

    got = await via_b.get(f"/v1/users/{user_id}/memories/{memory['id']}")
    assert got.status_code == 200 and got.json()["content"] == memory["content"]
    listed = (await via_b.get(f"/v1/users/{user_id}/memories")).json()["items"]
    assert [m["id"] for m in listed] == [memory["id"]]
    # No wait asked of the search: the write's own wait made it searchable on every process.
    found = await search(via_b, user_id, word)
    assert found["results"][0]["memory"]["id"] == memory["id"]
    assert stage_rank(found["results"][0], "bm25") == 1


async def test_an_indexed_search_on_one_process_sees_writes_made_on_the_other(
    via_a: httpx.AsyncClient, via_b: httpx.AsyncClient, user_id: str
) -> None:
    """Each write answered without waiting, then searched at once on the other process with
    `consistency: indexed`: the BM25 leg has it, whichever relay delivers it."""
    pairs = [(via_a, via_b), (via_b, via_a)] * 2
    for writer, reader in pairs:
        word = codeword()
        memory = await create_memory(writer, user_id, f"The spare key is under the {word}")
        found = await search(reader, user_id, word, consistency="indexed")
        top = found["results"][0]
        assert top["memory"]["id"] == memory["id"]
        assert stage_rank(top, "bm25") == 1, top["explanation"]
        lag = found["index_lag"]
        assert (lag["pending"], lag["stale"]) == (0, False), lag

    # An update on one process: the other's indexed search finds the new words, and the old
    # words no longer find anything through the BM25 leg.
    old, new = codeword(), codeword()
    memory = await create_memory(via_a, user_id, f"My bike lock opens with {old}")
    patched = await via_a.patch(
        f"/v1/users/{user_id}/memories/{memory['id']}", json={"content": f"My bike lock: {new}"}
    )
    assert patched.status_code == 200, patched.text
    fresh = await search(via_b, user_id, new, consistency="indexed")
    assert fresh["results"][0]["memory"]["id"] == patched.json()["id"]
    assert stage_rank(fresh["results"][0], "bm25") == 1
    stale = await search(via_b, user_id, old, consistency="indexed")
    assert [r["memory"]["id"] for r in stale["results"] if stage_rank(r, "bm25")] == []


# --- Erase ------------------------------------------------------------------------------------


async def pending_events(db: AsyncEngine, user_id: str) -> int:
    return await scalar(
        db,
        "SELECT count(*) FROM outbox WHERE user_id = :u AND processed_at IS NULL",
        u=user_id,
    )


async def documents_of(opensearch: AsyncOpenSearch, index_name: str, user_id: str) -> int:
    await opensearch.indices.refresh(index=index_name)
    found = await opensearch.count(index=index_name, body={"query": {"term": {"user_id": user_id}}})
    return int(found["count"])


async def leftover_rows(db: AsyncEngine, user_id: str) -> dict[str, int]:
    """The user's rows in every table an erase empties, beyond user_row_counts'."""
    left = await user_row_counts(db, user_id)
    for table in ("idempotency_keys", "ingest_tasks", "ingest_decisions"):
        left[table] = await scalar(
            db,
            f"SELECT count(*) FROM {table} WHERE user_id = :u",  # noqa: S608
            u=user_id,
        )
    return left


async def test_an_erase_on_one_process_leaves_nothing_seen_from_the_other(
    via_a: httpx.AsyncClient,
    via_b: httpx.AsyncClient,
    balanced: httpx.AsyncClient,
    db: AsyncEngine,
    opensearch: AsyncOpenSearch,
    index_name: str,
    user_id: str,
    other_user_id: str,
) -> None:
    word = codeword()
    path = f"/v1/users/{user_id}/memories"
    mine = []
    for n in range(3):
        written = await balanced.post(
            path, params=INDEXED, json={"content": f"Fact {n} about the {word}"}, headers=new_key()
        )
        assert written.status_code == 201, written.text
        mine.append(written.json())
    patched = await balanced.patch(
        f"{path}/{mine[0]['id']}", params=INDEXED, json={"content": f"Fact zero, the {word}"}
    )
    assert patched.status_code == 200, patched.text
    job = await ingest(via_b, user_id, message(f"I keep my {word} in the shed"))
    (added,) = decisions(job)
    theirs = await via_a.post(
        f"/v1/users/{other_user_id}/memories",
        params=INDEXED,
        json={"content": f"Another user's {word} must survive"},
    )
    assert theirs.status_code == 201, theirs.text
    ids = [m["id"] for m in mine] + [patched.json()["id"], added["memory_id"]]

    async def delivered() -> bool:
        return await pending_events(db, user_id) == 0

    await wait_until(delivered, timeout=60)
    before = await leftover_rows(db, user_id)
    assert before["memories"] == 5 and before["messages"] == 1 and before["idempotency_keys"] == 3
    documents = await documents_of(opensearch, index_name, user_id)
    assert documents >= 4  # every current version, at least

    erased = await via_a.delete(f"/v1/users/{user_id}")
    assert erased.status_code == 200, erased.text
    receipt = erased.json()
    assert receipt["postgres"]["memories"] == 5
    assert (receipt["opensearch_pending"], receipt["opensearch_deleted"]) == (False, documents)

    # The other process sees nothing of the user: not by id, list, history or search ...
    for memory_id in ids:
        assert (await via_b.get(f"{path}/{memory_id}")).status_code == 404
        assert (await via_b.get(f"{path}/{memory_id}/history")).status_code == 404
    listed = await via_b.get(path, params={"include_superseded": "true"})
    assert listed.status_code == 200 and listed.json()["items"] == []
    found = await search(via_b, user_id, word, consistency="indexed")
    assert found["results"] == []
    assert set((await leftover_rows(db, user_id)).values()) == {0}
    assert await documents_of(opensearch, index_name, user_id) == 0
    # ... and takes the user's next write at once, which the erasing process then finds.
    again = await via_b.post(path, params=INDEXED, json={"content": f"Back again with the {word}"})
    assert again.status_code == 201, again.text
    found = await search(via_a, user_id, word, consistency="indexed")
    assert [hit["memory"]["id"] for hit in found["results"]] == [again.json()["id"]]
    # The other user keeps everything, in both stores, seen from either process.
    kept = theirs.json()
    assert (await via_b.get(f"/v1/users/{other_user_id}/memories/{kept['id']}")).status_code == 200
    assert await indexed_document(opensearch, index_name, kept["id"]) is not None
    survived = await search(via_b, other_user_id, word)
    assert survived["results"][0]["memory"]["id"] == kept["id"]
    assert stage_rank(survived["results"][0], "bm25") == 1


async def test_an_erase_on_one_process_is_final_for_writes_in_flight_on_the_other(
    via_a: httpx.AsyncClient,
    via_b: httpx.AsyncClient,
    db: AsyncEngine,
    opensearch: AsyncOpenSearch,
    index_name: str,
    user_id: str,
) -> None:
    """Writers of memories, batches and messages on process B while A erases the user: once
    both processes' relays and workers settle, every write B acknowledged before the erase is
    gone, every one sent after it was accepted and is there, and nothing else of the user is
    left (a write in flight during the erase was refused, or began after it)."""
    stop = asyncio.Event()
    log: list = []
    writers = [
        asyncio.create_task(_write_until(via_b, user_id, kind, stop, log))
        for kind in ("memory", "batch", "message")
    ]

    async def some_acknowledged() -> bool:
        return sum(1 for entry in log if entry[1] in (200, 201, 202)) >= 6

    try:
        await wait_until(some_acknowledged, timeout=120)
        erase_sent = time.monotonic()
        erase = await via_a.delete(f"/v1/users/{user_id}")
        erase_answered = time.monotonic()

        async def each_writer_answered_after_the_erase() -> bool:
            return {kind for kind, _, sent, _, _ in log if sent > erase_answered} == {
                "memory",
                "batch",
                "message",
            }

        await wait_until(each_writer_answered_after_the_erase, timeout=120)
    finally:
        stop.set()
        await asyncio.gather(*writers)
    assert erase.status_code == 200, erase.text
    await assert_only_what_began_after_the_erase(
        db, opensearch, index_name, user_id, log, erase_sent, erase_answered
    )


# --- Per-user write locks ---------------------------------------------------------------------


async def version_chains(db: AsyncEngine, user_id: str) -> dict[Any, list[dict]]:
    """Every chain of the user from the memories table, its versions in order."""
    chains: dict[Any, list[dict]] = defaultdict(list)
    for row in await rows(
        db,
        "SELECT id, chain_id, version, is_current, replaces_id, superseded_at FROM memories "
        "WHERE user_id = :u ORDER BY chain_id, version",
        u=user_id,
    ):
        chains[row["chain_id"]].append(dict(row))
    return chains


def assert_one_line(versions: list[dict]) -> None:
    """Versions 1..n without gap or duplicate, each replacing the one before, all but the last
    superseded, and at most the last current."""
    assert [v["version"] for v in versions] == list(range(1, len(versions) + 1)), versions
    assert [v["replaces_id"] for v in versions] == [None, *(v["id"] for v in versions[:-1])]
    assert all(v["superseded_at"] is not None and not v["is_current"] for v in versions[:-1])


async def test_racing_updates_of_one_memory_on_both_processes_make_one_version(
    balanced: httpx.AsyncClient, proxy: RoundRobinProxy, db: AsyncEngine, user_id: str
) -> None:
    memory = await create_memory(balanced, user_id, "I have one cat")
    before = proxy.served()
    answers = await asyncio.gather(
        *(
            balanced.patch(
                f"/v1/users/{user_id}/memories/{memory['id']}",
                json={"content": f"I have {n} cats"},
                headers={"If-Match": memory["version_id"]},
            )
            for n in range(2, 10)
        )
    )
    spread_since(proxy, before)
    assert sorted(r.status_code for r in answers) == [200] + [412] * 7, [r.text for r in answers]
    (winner,) = (r.json() for r in answers if r.status_code == 200)
    assert {r.json()["current_version_id"] for r in answers if r.status_code == 412} == {
        winner["version_id"]
    }
    history = (await balanced.get(f"/v1/users/{user_id}/memories/{memory['id']}/history")).json()
    assert [(v["version"], v["is_current"]) for v in history["versions"]] == [(1, False), (2, True)]
    (chain,) = (await version_chains(db, user_id)).values()
    assert_one_line(chain)


async def follow_and_update(
    http: httpx.AsyncClient, user_id: str, memory_id: str, contents: list[str], log: list
) -> None:
    """Update the memory once per content, each time only while the version known to be
    current is (If-Match); on a 412 (another writer got there first) again with the current
    version it names."""
    version_id = memory_id  # version 1's id is the memory's
    for content in contents:
        while True:
            response = await http.patch(
                f"/v1/users/{user_id}/memories/{memory_id}",
                json={"content": content},
                headers={"If-Match": version_id},
            )
            log.append(response)
            if response.status_code != 412:
                break
            version_id = response.json()["current_version_id"]
        assert response.status_code == 200, response.text
        version_id = response.json()["version_id"]


async def test_updates_on_both_processes_keep_one_gapless_chain(
    balanced: httpx.AsyncClient, proxy: RoundRobinProxy, db: AsyncEngine, user_id: str
) -> None:
    memory = await create_memory(balanced, user_id, "I have read 0 books this year")
    writers, rounds = 3, 2
    log: list[httpx.Response] = []
    before = proxy.served()
    await asyncio.gather(
        *(
            follow_and_update(
                balanced,
                user_id,
                memory["id"],
                [f"I have read {w * rounds + r + 1} books this year" for r in range(rounds)],
                log,
            )
            for w in range(writers)
        )
    )
    spread_since(proxy, before)
    no_server_errors(log)
    assert {r.status_code for r in log} <= {200, 412}
    history = await balanced.get(f"/v1/users/{user_id}/memories/{memory['id']}/history")
    versions = history.json()["versions"]
    assert [v["version"] for v in versions] == list(range(1, writers * rounds + 2))
    assert [v["is_current"] for v in versions] == [False] * writers * rounds + [True]
    # Every acknowledged update is one version: none lost, none twice.
    acknowledged = sorted(r.json()["version_id"] for r in log if r.status_code == 200)
    assert acknowledged == sorted(v["version_id"] for v in versions[1:])
    (chain,) = (await version_chains(db, user_id)).values()
    assert_one_line(chain)
    assert chain[-1]["is_current"]


async def test_messages_and_updates_of_one_user_on_both_processes_keep_consistent_chains(
    via_a: httpx.AsyncClient,
    balanced: httpx.AsyncClient,
    proxy: RoundRobinProxy,
    db: AsyncEngine,
    user_id: str,
) -> None:
    """Message submissions (corrections of where the user lives, applied by either process's
    workers) and API updates of the same memory, at once through both processes."""
    (home,) = decisions(await ingest(via_a, user_id, message("I live in Lisbon")))
    home_id = home["memory_id"]
    cities = ["Porto", "Madrid", "Berlin", "Vienna"]
    log: list[httpx.Response] = []

    async def submit(city: str) -> None:
        response = await balanced.post(
            f"/v1/users/{user_id}/messages",
            params={"wait": "true"},
            json={"messages": [message(f"I moved to {city}"), message(f"I love {city} in May")]},
        )
        log.append(response)

    before = proxy.served()
    await asyncio.gather(
        *(submit(city) for city in cities),
        follow_and_update(balanced, user_id, home_id, ["I live in Rome", "I live in Athens"], log),
    )
    spread_since(proxy, before)
    no_server_errors(log)
    jobs = []
    for response in log:
        if response.request.url.path.endswith("/messages"):
            assert response.status_code in (200, 202), response.text
            jobs.append(await wait_job(balanced, user_id, response.json()["job_id"]))
    assert [job["state"] for job in jobs] == ["done"] * len(cities), jobs
    made = [d for job in jobs for d in decisions(job)]
    assert all(d["operation"] in ("ADD", "UPDATE", "NONE") for d in made), made

    chains = await version_chains(db, user_id)
    for versions in chains.values():
        assert_one_line(versions)
        assert versions[-1]["is_current"]  # nothing here deletes a memory
    # Every acknowledged change is one version, and every version one acknowledged change:
    # none lost to a writer on the other process, none applied twice.
    firsts = {str(v[0]["id"]) for v in chains.values()}
    successors = [str(v["id"]) for versions in chains.values() for v in versions[1:]]
    added = {d["memory_id"] for d in made if d["operation"] == "ADD"}
    updated = [d["memory_id"] for d in made if d["operation"] == "UPDATE"]
    patched = [
        r.json()["version_id"] for r in log if r.request.method == "PATCH" and r.status_code == 200
    ]
    assert firsts == added | {home_id}
    assert sorted(successors) == sorted(updated + patched)
    assert len(patched) == 2 and updated, made  # both kinds of update ran
    home_chain = chains[uuid.UUID(home_id)]
    assert set(patched) <= {str(v["id"]) for v in home_chain}
