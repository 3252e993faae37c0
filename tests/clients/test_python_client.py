"""The Python client (clients/python, `cognis_client`) against the real API process."""

from __future__ import annotations

import json

import pytest
from cognis_client import (
    AsyncCognisClient,
    AuthenticationError,
    CognisClient,
    ConflictError,
    InvalidRequestError,
    MemoriesDeleted,
    MemoryInput,
    NotFoundError,
    PreconditionFailedError,
    RetryPolicy,
    ServiceUnavailableError,
    StageScore,
)

from tests.conftest import API_KEY, ApiProcess


@pytest.fixture
def cognis(api: ApiProcess):
    with CognisClient(api.url, api_key=API_KEY) as client:
        yield client


def test_a_memory_chain_through_the_sync_client(cognis: CognisClient, user_id: str) -> None:
    first = cognis.add_memory(
        user_id, MemoryInput(content="Ines lives in Tokyo.", category="personal_details")
    )
    assert (first.user_id, first.version, first.is_current) == (user_id, 1, True)
    assert cognis.get_memory(user_id, first.id) == first

    moved = cognis.update_memory(user_id, first.id, content="Ines lives in Osaka.")
    assert (moved.id, moved.chain_id, moved.replaces_id) == (first.id, first.id, first.version_id)
    assert moved.category == "personal_details"  # kept from the version it replaces

    ended = cognis.delete_memory(user_id, moved.id)
    assert ended.is_current is False and ended.superseded_at is not None
    chain = cognis.history(user_id, first.id)
    assert [v.content for v in chain.versions] == ["Ines lives in Tokyo.", "Ines lives in Osaka."]
    assert chain.current is None  # the delete ended the chain


def test_an_id_kept_from_create_outlives_updates_and_if_match_guards_them(
    cognis: CognisClient, user_id: str, other_user_id: str
) -> None:
    kept = cognis.add_memory(user_id, "Ines has one cat.")
    second = cognis.update_memory(user_id, kept.id, content="Ines has two cats.")
    third = cognis.update_memory(user_id, kept.id, content="Ines has three cats.")
    assert [second.id, third.id] == [kept.id, kept.id]
    assert len({kept.version_id, second.version_id, third.version_id}) == 3
    assert cognis.get_memory(user_id, kept.id) == third
    assert cognis.get_memory(user_id, second.version_id).content == "Ines has two cats."
    # An old version's id names the memory too: the update applies to the current version.
    fourth = cognis.update_memory(user_id, second.version_id, content="Ines has four cats.")
    assert (fourth.id, fourth.replaces_id) == (kept.id, third.version_id)

    with pytest.raises(PreconditionFailedError) as stale:
        cognis.update_memory(user_id, kept.id, if_match=third, content="Ines has no cat.")
    assert stale.value.status == 412 and isinstance(stale.value, ConflictError)
    assert stale.value.current_version_id == str(fourth.version_id)
    with pytest.raises(PreconditionFailedError):
        cognis.delete_memory(user_id, kept.id, if_match=third.version_id)
    fifth = cognis.update_memory(user_id, kept.id, if_match=fourth, content="Ines has five cats.")
    assert fifth.version == 5
    with pytest.raises(NotFoundError):
        cognis.update_memory(other_user_id, kept.id, content="Mine now.")

    ended = cognis.delete_memory(user_id, kept.id, if_match=str(fifth.version_id))
    assert (ended.id, ended.version_id, ended.is_current) == (kept.id, fifth.version_id, False)
    history = cognis.history(user_id, second.version_id)
    assert history.id == kept.id and [v.version for v in history.versions] == [1, 2, 3, 4, 5]
    with pytest.raises(ConflictError) as deleted:
        cognis.delete_memory(user_id, kept.id)
    assert deleted.value.status == 409 and "deleted" in deleted.value.detail


async def test_the_async_client_updates_by_a_lasting_id_with_if_match(
    api: ApiProcess, user_id: str
) -> None:
    async with AsyncCognisClient(api.url, api_key=API_KEY) as cognis:
        kept = await cognis.add_memory(user_id, "Ines reads one book a month.")
        read = await cognis.update_memory(user_id, kept.id, content="Ines reads two a month.")
        await cognis.update_memory(user_id, kept.id, content="Ines reads three a month.")
        with pytest.raises(PreconditionFailedError):
            await cognis.update_memory(user_id, kept.id, if_match=read, content="None.")
        latest = await cognis.get_memory(user_id, kept.id)
        ended = await cognis.delete_memory(user_id, kept.id, if_match=latest)
        assert (ended.id, ended.version, ended.is_current) == (kept.id, 3, False)


def test_delete_memories_ends_an_agents_then_all_keeping_history(
    cognis: CognisClient, user_id: str
) -> None:
    shared = cognis.add_memory(user_id, "Ines likes window seats.")
    planner = cognis.add_memory(user_id, "Ines booked the Lisbon hotel.", agent_id="planner")
    with pytest.raises(InvalidRequestError) as unfiltered:
        cognis.delete_memories(user_id)
    assert unfiltered.value.problem["field"] == "all"
    ended = cognis.delete_memories(user_id, agent_id="planner", wait_for="indexed")
    assert isinstance(ended, MemoriesDeleted)
    assert (ended.user_id, ended.deleted, ended.ids) == (user_id, 1, [planner.id])
    assert [m.id for m in cognis.iter_memories(user_id)] == [shared.id]
    rest = cognis.delete_memories(
        user_id, filters={"field": "agent", "op": "exists", "value": False}
    )
    assert rest.ids == [shared.id]
    assert cognis.delete_memories(user_id, all=True).deleted == 0
    assert cognis.get_memory(user_id, planner.id).is_current is False  # history kept
    assert [v.content for v in cognis.history(user_id, shared.id).versions] == [shared.content]


async def test_the_async_client_deletes_memories(api: ApiProcess, user_id: str) -> None:
    async with AsyncCognisClient(api.url, api_key=API_KEY) as cognis:
        made = [await cognis.add_memory(user_id, f"Ines visited city {n}.") for n in range(2)]
        ended = await cognis.delete_memories(user_id, all=True)
        assert sorted(ended.ids) == sorted(m.id for m in made)
        assert [m async for m in cognis.iter_memories(user_id)] == []


def test_pagination_helper_walks_every_page(cognis: CognisClient, user_id: str) -> None:
    created = cognis.add_memories(
        user_id,
        [{"content": f"Ines owns {n} bicycles.", "category": "hobbies"} for n in range(5)],
    )
    first_page = cognis.list_memories(user_id, limit=2)
    assert len(first_page.items) == 2 and first_page.next_cursor is not None
    walked = list(cognis.iter_memories(user_id, page_size=2))
    assert sorted(m.id for m in walked) == sorted(m.id for m in created)
    assert len(walked) == 5
    assert list(cognis.iter_memories(user_id, category="travel")) == []


def test_explained_search_gives_stage_objects(cognis: CognisClient, user_id: str) -> None:
    cognis.add_memories(
        user_id,
        [
            "Ines is allergic to shellfish.",
            "Ines plays the cello on Sundays.",
            "Ines works as a tram driver in Lisbon.",
        ],
    )
    result = cognis.search(
        user_id, "what instrument does Ines play", explain=True, consistency="indexed", top_k=3
    )
    top = result.results[0]
    assert top.memory.content == "Ines plays the cello on Sundays."
    assert top.rank == 1 and result.index_lag.stale is False
    vector = top.stage("768d")
    assert isinstance(vector, StageScore) and vector.rank is not None
    assert top.stage("final") == StageScore(rank=1, score=top.score)
    assert result.query_analysis is not None and "history_intent" in result.query_analysis
    plain = cognis.search(user_id, "what instrument does Ines play", top_k=3)
    assert all(hit.explanation is None for hit in plain.results)
    assert top.stage("relevance") == StageScore(rank=1, score=top.relevance)
    floored = cognis.search(user_id, "what instrument does Ines play", min_relevance=top.relevance)
    assert top.memory.id in {h.memory.id for h in floored.results}
    assert all(h.relevance >= top.relevance for h in floored.results)
    assert (
        len(floored.results) < len(plain.results)
        or min(h.relevance for h in plain.results) >= top.relevance
    )


def test_problem_json_becomes_typed_errors(
    api: ApiProcess, cognis: CognisClient, user_id: str, other_user_id: str
) -> None:
    mine = cognis.add_memory(user_id, "Ines keeps a diary.")
    with pytest.raises(NotFoundError) as not_found:
        cognis.get_memory(other_user_id, mine.id)  # not yours looks like not there
    assert not_found.value.status == 404 and str(mine.id) in not_found.value.detail

    with pytest.raises(InvalidRequestError) as invalid:
        cognis.add_memory(user_id, {"content": "x", "scope": "CONTEXT"})  # no session_id
    assert invalid.value.status == 400 and "session_id" in invalid.value.detail
    with pytest.raises(InvalidRequestError) as bad_top_k:
        cognis.search(user_id, "diary", top_k=10_000)
    assert "top_k" in bad_top_k.value.detail

    stranger = CognisClient(api.url, api_key="not-" + API_KEY)
    with stranger, pytest.raises(AuthenticationError) as denied:
        stranger.list_memories(user_id)
    assert denied.value.status == 401 and "X-API-Key" in denied.value.detail


async def test_async_client_ingests_messages_and_finds_them(api: ApiProcess, user_id: str) -> None:
    async with AsyncCognisClient(api.url, api_key=API_KEY) as cognis:
        job = await cognis.add_messages(
            user_id,
            [{"content": "I started learning Finnish last month.", "speaker": "Ines"}],
            wait=True,
        )
        assert job.state == "done"
        (decision,) = job.decisions
        assert decision.operation == "ADD" and decision.memory_id is not None
        assert (await cognis.get_job(user_id, job.job_id)).decisions == job.decisions

        found = await cognis.search(user_id, "Finnish lessons", consistency="indexed")
        assert found.results[0].memory.id == decision.memory_id
        walked = [m async for m in cognis.iter_memories(user_id, page_size=1)]
        assert [m.id for m in walked] == [decision.memory_id]

        erased = await cognis.erase_user(user_id)
        assert erased.postgres["memories"] == 1 and erased.writes_refused_until is None
        with pytest.raises(NotFoundError):
            await cognis.get_memory(user_id, decision.memory_id)
        # A new life at once: the next write for the id is accepted.
        again = await cognis.add_memory(user_id, "Ines started learning Estonian.")
        assert [m.id async for m in cognis.iter_memories(user_id)] == [again.id]


def _counting(client: CognisClient) -> list[int]:
    statuses: list[int] = []
    client.http.event_hooks["response"].append(lambda r: statuses.append(r.status_code))
    return statuses


def test_503_is_retried_after_retry_after_then_raised(
    api_without_embedder: ApiProcess,
    dead_embedder_url: str,
    user_id: str,
) -> None:
    waits: list[tuple[int, float]] = []
    with CognisClient(
        api_without_embedder.url,
        api_key=API_KEY,
        retry=RetryPolicy(max_retries=1, max_delay_s=10),
        on_retry=lambda attempt, delay, _error: waits.append((attempt, delay)),
    ) as cognis:
        statuses = _counting(cognis)
        with pytest.raises(ServiceUnavailableError) as unavailable:
            cognis.add_memory(user_id, "Ines keeps bees.")
    assert statuses == [503, 503]
    # The server asks for 5 s; the client waits exactly that, not its own backoff.
    assert waits == [(1, unavailable.value.retry_after_s)] and waits[0][1] == 5
    assert f"{dead_embedder_url}/embeddings" in unavailable.value.detail

    # A Retry-After beyond what the caller accepts is not waited for.
    with CognisClient(
        api_without_embedder.url,
        api_key=API_KEY,
        retry=RetryPolicy(max_retries=3, max_delay_s=1),
    ) as impatient:
        statuses = _counting(impatient)
        # A write: a search answers from BM25 alone while the model service is down.
        with pytest.raises(ServiceUnavailableError):
            impatient.add_memory(user_id, "Ines sells honey.")
    assert statuses == [503]


def test_backoff_without_retry_after_grows() -> None:
    policy = RetryPolicy(backoff_base_s=1.0)
    delays = [policy.delay_s(attempt, None) for attempt in range(4)]
    assert all(0.5 * 2**n <= d <= 2**n for n, d in enumerate(delays))
    assert policy.delay_s(0, 7.0) == 7.0


def test_user_ids_are_path_encoded(cognis: CognisClient) -> None:
    # Unencoded, "?" would end the path and the memory would go to user "ines".
    with pytest.raises(InvalidRequestError) as refused:
        cognis.add_memory("ines?x=1", "Ines")
    assert refused.value.problem["instance"].endswith("/memories")
    assert refused.value.detail.startswith("user_id")  # the id itself was refused, not "ines"


def test_filters_as_plain_dicts_and_the_users_list(cognis: CognisClient, user_id: str) -> None:
    cognis.add_memories(
        user_id,
        [
            {"content": "Ines plans the Apollo launch.", "metadata": {"project": "apollo"}},
            {"content": "Ines plans the Gemini launch.", "metadata": {"project": "gemini"}},
        ],
    )
    apollo = {"field": "metadata.project", "op": "eq", "value": "apollo"}
    found = cognis.search(user_id, "launch plans", filters=apollo, consistency="indexed")
    assert [h.memory.content for h in found.results] == ["Ines plans the Apollo launch."]
    listed = cognis.list_memories(user_id, filters={"not": apollo})
    assert [m.content for m in listed.items] == ["Ines plans the Gemini launch."]
    with pytest.raises(InvalidRequestError, match="unknown operator"):
        cognis.search(user_id, "launch", filters={"field": "category", "op": "like", "value": 1})

    users = cognis.list_users(prefix=user_id)
    assert [(u.user_id, u.memories, u.versions) for u in users.items] == [(user_id, 2, 2)]
    assert users.next_cursor is None


def test_expiry_through_the_client(cognis: CognisClient, user_id: str) -> None:
    brief = cognis.add_memory(user_id, MemoryInput(content="Gate code 4411.", ttl_s=600))
    assert brief.expires_at is not None
    assert 590 <= (brief.expires_at - brief.created_at).total_seconds() <= 610
    (batched,) = cognis.add_memories(user_id, [{"content": "Desk 12 today.", "ttl_s": 60}])
    assert batched.expires_at is not None and batched.expires_at < brief.expires_at
    cleared = cognis.update_memory(user_id, brief.id, expires_at=None)
    assert cleared.expires_at is None and cleared.replaces_id == brief.id
    moved = cognis.update_memory(user_id, cleared.id, ttl_s=30)
    assert moved.expires_at is not None
    assert [v.expires_at for v in cognis.history(user_id, moved.id).versions] == [
        moved.expires_at
    ] * 3
    with pytest.raises(InvalidRequestError, match="not in the future"):
        cognis.add_memory(user_id, {"content": "Late.", "expires_at": "2001-01-01T00:00:00Z"})


def test_agents_and_runs_through_the_client(cognis: CognisClient, user_id: str) -> None:
    mine = cognis.add_memory(
        user_id, MemoryInput(content="Ines plans the Apollo launch.", agent_id="planner")
    )
    assert (mine.agent_id, mine.run_id) == ("planner", None)
    (theirs, shared) = cognis.add_memories(
        user_id,
        [
            MemoryInput(content="Ines plans the Gemini launch.", agent_id="pr", run_id="r1"),
            {"content": "Ines plans every launch carefully."},
        ],
    )
    assert (theirs.agent_id, theirs.run_id, shared.agent_id) == ("pr", "r1", None)
    found = cognis.search(user_id, "launch plans", agent_id="planner", consistency="indexed")
    assert {h.memory.id for h in found.results} == {mine.id, shared.id}
    listed = cognis.list_memories(user_id, run_id="r1")
    assert {m.id for m in listed.items} == {mine.id, theirs.id, shared.id}
    listed = cognis.list_memories(user_id, agent_id="pr", run_id="r2")
    assert {m.id for m in listed.items} == {shared.id}
    moved = cognis.update_memory(user_id, theirs.id, agent_id=None)
    assert (moved.agent_id, moved.run_id) == (None, "r1")


def test_export_through_the_client(cognis: CognisClient, user_id: str) -> None:
    cognis.add_memories(
        user_id,
        [
            MemoryInput(content="Ines plans the Apollo launch.", agent_id="planner"),
            MemoryInput(content="Ines plans the Gemini launch.", agent_id="pr"),
        ],
    )
    lines = [json.loads(line) for line in cognis.export(user_id).splitlines()]
    assert {line["content"] for line in lines} == {
        "Ines plans the Apollo launch.",
        "Ines plans the Gemini launch.",
    }
    planner = cognis.export(user_id, agent_id="planner", vectors=True)
    (line,) = [json.loads(text) for text in planner.splitlines()]
    assert (line["agent_id"], len(line["embedding"])) == ("planner", 768)
    gemini = {"field": "content", "op": "eq", "value": "x"}
    with pytest.raises(InvalidRequestError, match="unknown field"):
        cognis.export(user_id, filters=gemini)


def test_dry_run_import_and_index_waits_through_the_client(
    cognis: CognisClient, user_id: str
) -> None:
    tokyo = cognis.add_memory(
        user_id, MemoryInput(content="Ines lives in Tokyo.", category="personal_details")
    )
    planned = cognis.dry_run(user_id, ["I moved to Osaka last week."])
    assert planned.dry_run is True and len(planned.messages) == 1
    assert planned.decisions and planned.messages[0].content == "I moved to Osaka last week."
    # Nothing written: neither a memory nor a message.
    assert [m.id for m in cognis.list_memories(user_id).items] == [tokyo.id]

    summary = cognis.import_memories(
        user_id,
        [
            {"external_id": "a-1", "content": "Ines plays the cello.", "category": "hobbies"},
            '{"external_id": "a-2", "content": ',
            {"external_id": "a-3", "content": "Ines reads Finnish novels.", "category": "hobbies"},
        ],
    )
    assert (summary.imported, summary.skipped, summary.failed) == (2, 0, 1)
    assert summary.errors[0].line == 2
    again = cognis.import_memories(
        user_id, b'{"external_id": "a-1", "content": "Ines plays the cello."}\n'
    )
    assert (again.imported, again.skipped) == (0, 1)
    assert len(cognis.list_memories(user_id, limit=10).items) == 3

    states: list[str | None] = []
    cognis.http.event_hooks["response"].append(
        lambda r: states.append(r.headers.get("X-Index-State"))
    )
    cello = cognis.add_memory(user_id, "Ines tunes her cello each morning.", wait_for="indexed")
    cognis.update_memory(user_id, cello.id, content="Ines tunes her cello at night.")
    assert states == ["indexed", None]
    queued = cognis.add_messages(user_id, ["I moved to Kyoto last spring."])
    finished = cognis.wait_for_job(user_id, queued.job_id, timeout_s=120)
    assert (finished.job_id, finished.state) == (queued.job_id, "done")


async def test_waiting_for_a_queued_job_through_the_async_client(
    api: ApiProcess, user_id: str
) -> None:
    async with AsyncCognisClient(api.url, api_key=API_KEY) as cognis:
        queued = await cognis.add_messages(user_id, ["I started learning the cello."])
        finished = await cognis.wait_for_job(user_id, queued.job_id, timeout_s=120)
        assert finished.job_id == queued.job_id and finished.state == "done"
        (decision,) = finished.decisions
        assert decision.operation == "ADD"
        planned = await cognis.dry_run(user_id, ["I stopped learning the cello."])
        assert planned.dry_run is True
        summary = await cognis.import_memories(
            user_id, [{"external_id": "b-1", "content": "Ines owns a viola."}]
        )
        assert summary.imported == 1
        with pytest.raises(NotFoundError):
            await cognis.wait_for_job(user_id, "00000000-0000-0000-0000-000000000000")


def test_context_and_profile_through_the_sync_client(cognis: CognisClient, user_id: str) -> None:
    first = cognis.add_memory(
        user_id, MemoryInput(content="Ines lives in Tokyo.", category="personal_details")
    )
    cognis.add_memory(user_id, MemoryInput(content="Ines plays the violin.", category="hobbies"))
    moved = cognis.update_memory(user_id, first.id, content="Ines lives in Osaka.")

    block = cognis.context(user_id, max_tokens=200, template="markdown")
    assert [(c.section, c.content) for c in block.cited] == [
        ("changes", "Ines lives in Osaka."),
        ("profile", "Ines plays the violin."),
    ]
    assert block.cited[0].replaced_content == "Ines lives in Tokyo."
    assert "(changed from: Ines lives in Tokyo.)" in block.block
    assert block.tokens <= block.max_tokens == 200 and not block.truncated

    profile = cognis.profile(user_id, category="personal_details")
    (details,) = profile.categories
    (fact,) = details.memories
    assert (details.count, profile.total, fact.memory.id) == (1, 1, moved.id)
    assert fact.replaced is not None and fact.replaced.content == "Ines lives in Tokyo."


async def test_context_through_the_async_client(api: ApiProcess, user_id: str) -> None:
    async with AsyncCognisClient(api.url, api_key=API_KEY) as cognis:
        await cognis.add_memory(user_id, MemoryInput(content="Ines is allergic to cats."))
        block = await cognis.context(
            user_id, "Is Ines allergic to cats?", max_tokens=100, template="json"
        )
        assert [c.content for c in block.cited] == ["Ines is allergic to cats."]
        assert json.loads(block.block)["relevant"][0]["content"] == "Ines is allergic to cats."
        profile = await cognis.profile(user_id)
        assert profile.total == 1 and profile.last_changed_at is not None
