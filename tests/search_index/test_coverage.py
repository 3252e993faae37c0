"""An index behind Postgres (deleted, recreated empty, missing documents) is noticed by the
coverage check, reported by /ready and by every search's `stale`, refilled when empty, and
reported fresh again once it holds every delivered memory version. Real Postgres, the real
OpenSearch index of the test session, the in-process API and the session's relay process."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator

import pytest
from sqlalchemy import text
from structlog.testing import capture_logs

from app.search_index.coverage import (
    REINDEX_REMEDY,
    IndexCoverage,
    IndexCoverageCheck,
    judge,
    readiness,
)
from app.search_index.outbox import pending_count
from app.search_index.reindex import requeue_memories
from tests.conftest import only_running, wait_until
from tests.factories import create_memory, search, stage_rank

QUERY = "Which instrument does Wenceslas tune?"
CONTENT = "Wenceslas tunes the harpsichord of the chapel every Friday."
MARK_DELIVERED = text(
    "UPDATE outbox SET processed_at = now() WHERE memory_id = :m AND processed_at IS NULL"
)


def test_fewer_documents_than_delivered_versions_is_behind() -> None:
    assert judge(documents=9, expected=10) == "behind"
    assert judge(documents=10, expected=10) == "complete"
    # A document whose deletion is still queued is no harm to a search.
    assert judge(documents=11, expected=10) == "complete"


def test_readiness_fields_say_what_to_do_while_behind() -> None:
    assert readiness(None) == {"index": "unchecked"}
    behind = readiness(IndexCoverage("behind", documents=3, expected=5))
    assert (behind["index"], behind["index_documents"], behind["index_expected"]) == (
        "behind",
        3,
        5,
    )
    assert behind["index_remedy"] == REINDEX_REMEDY
    requeued = readiness(IndexCoverage("behind", documents=0, expected=5, requeued=7))
    assert requeued["index_remedy"].startswith("re-queued 7 memory versions")
    assert "index_remedy" not in readiness(IndexCoverage("complete", documents=5, expected=5))


@pytest.fixture
async def coverage(inprocess_api, monkeypatch) -> AsyncIterator[IndexCoverageCheck]:
    """The in-process API's check, starting from an index that holds every delivered version
    (an earlier test may have left it short), its cached result put back afterwards. A refresh
    window of zero: every check refreshes the index, so only undelivered events are pending
    (a delivered one would otherwise make a search stale for a second or so)."""
    runtime = inprocess_api.app.state.runtime
    monkeypatch.setattr(runtime.index, "refresh_window_s", 0.0)
    check: IndexCoverageCheck = runtime.index_coverage
    if (await check.measure()).state != "complete":
        await requeue_memories(runtime.background_sessionmaker)
        await delivered_everything(runtime)
    yield check
    check.latest = None


async def delivered_everything(runtime) -> None:
    """Deliver every pending event as `make reindex` does (batch after batch, here, beside the
    session's own relay: late in a run the worker's database holds thousands of versions),
    then wait until the index holds every version."""

    async def done() -> bool:
        while (await runtime.relay.run_once()).delivered:
            pass
        async with runtime.background_sessionmaker() as session:
            if await pending_count(session):
                return False
        return (await runtime.index_coverage.measure()).state == "complete"

    await wait_until(done, timeout=300)


async def bm25_rank(client, user_id: str, memory_id: str) -> tuple[int | None, bool]:
    found = await search(client, user_id, QUERY)
    hit = next((h for h in found["results"] if h["memory"]["id"] == memory_id), None)
    return (None if hit is None else stage_rank(hit, "bm25")), found["index_lag"]["stale"]


async def indexed_memory(client, user_id: str) -> str:
    memory = await create_memory(client, user_id, CONTENT)
    found = await search(client, user_id, QUERY, consistency="indexed")
    assert found["index_lag"]["stale"] is False
    return str(memory["id"])


@pytest.mark.skipif(
    not os.environ.get("COGNIS_TEST_INDEX_LOSS"),
    reason="deletes the worker's whole index; re-delivering a late run's thousands of versions "
    "outlasts its wait and leaves the next tests of the worker without BM25 "
    "(COGNIS_TEST_INDEX_LOSS=1 runs it)",
)
async def test_a_deleted_index_is_behind_until_reindexed(
    client, anonymous, inprocess_api, opensearch, index_name, coverage, user_id, monkeypatch
) -> None:
    monkeypatch.setattr(coverage, "requeue_empty", False)  # the operator's remedy, not ours
    runtime = inprocess_api.app.state.runtime
    memory_id = await indexed_memory(client, user_id)
    fresh = await coverage.check()
    assert fresh.state == "complete" and fresh.documents >= fresh.expected >= 1
    ready = (await anonymous.get("/ready")).json()
    assert (ready["status"], ready["index"]) == ("ready", "complete")
    assert await bm25_rank(client, user_id, memory_id) == (1, False)

    await opensearch.indices.delete(index=index_name)
    with capture_logs() as logs:
        found = await coverage.check()
    assert (found.state, found.documents, found.requeued) == ("behind", 0, None)
    assert found.expected >= 1
    warnings = [e for e in logs if e["log_level"] == "warning"]
    assert [(e["event"], e["remedy"]) for e in warnings] == [
        ("search_index.behind", REINDEX_REMEDY)
    ]

    answer = await anonymous.get("/ready")
    ready = answer.json()
    # Degraded, not unavailable: the vector leg and every write still work.
    assert answer.status_code == 200 and ready["status"] == "degraded"
    assert (ready["index"], ready["index_documents"]) == ("behind", 0)
    assert ready["index_expected"] == found.expected
    assert ready["index_remedy"] == REINDEX_REMEDY
    # Nothing of this user is pending in the outbox, and yet BM25 misses the memory: stale.
    lagging = await search(client, user_id, QUERY)
    assert lagging["index_lag"]["pending"] == 0 and lagging["index_lag"]["stale"] is True
    rank, _ = await bm25_rank(client, user_id, memory_id)
    assert rank is None

    await requeue_memories(runtime.background_sessionmaker)  # what `make reindex` does
    await delivered_everything(runtime)
    recovered = await coverage.check()
    assert recovered.state == "complete" and recovered.documents >= recovered.expected >= 1
    ready = (await anonymous.get("/ready")).json()
    assert (ready["status"], ready["index"]) == ("ready", "complete")
    assert "index_remedy" not in ready
    assert await bm25_rank(client, user_id, memory_id) == (1, False)


async def test_an_empty_index_is_requeued_by_the_check(
    client, anonymous, inprocess_api, opensearch, index_name, coverage, user_id
) -> None:
    runtime = inprocess_api.app.state.runtime
    memory_id = await indexed_memory(client, user_id)
    await opensearch.indices.delete(index=index_name)
    with capture_logs() as logs:
        found = await coverage.check()
    assert found.state == "behind" and found.documents == 0
    assert found.requeued is not None and found.requeued >= found.expected >= 1
    requeued = [e for e in logs if e["event"] == "search_index.requeued_empty_index"]
    assert [e["requeued"] for e in requeued] == [found.requeued]
    ready = (await anonymous.get("/ready")).json()
    assert ready["status"] == "degraded" and ready["index"] == "behind"
    assert ready["index_remedy"].startswith(f"re-queued {found.requeued} memory versions")

    # The relay delivers what was re-queued; the next check finds the index whole again.
    await delivered_everything(runtime)
    recovered = await coverage.check()
    assert recovered.state == "complete" and recovered.requeued is None
    assert (await anonymous.get("/ready")).json()["status"] == "ready"
    assert await bm25_rank(client, user_id, memory_id) == (1, False)
    # Whole again, the next check re-queues nothing.
    async with runtime.background_sessionmaker() as session:
        assert await pending_count(session) == 0
    assert (await coverage.check()).requeued is None


async def test_an_index_missing_some_documents_is_behind_and_not_requeued(
    client, db, inprocess_api, coverage, user_id
) -> None:
    runtime = inprocess_api.app.state.runtime
    await indexed_memory(client, user_id)
    before = await coverage.check()
    assert before.state == "complete" and before.documents >= 1
    with only_running():  # the relay frozen: the new memory's event stays in the outbox
        memory = await create_memory(client, user_id, "Wenceslas keeps a spare set of quills.")
        # As if delivered to a cluster since replaced: Postgres says delivered, the index
        # never had it.
        async with db.begin() as connection:
            await connection.execute(MARK_DELIVERED, {"m": memory["id"]})
    found = await coverage.check()
    # Not empty: rebuilding every version is the operator's call (`make reindex`).
    assert (found.state, found.requeued) == ("behind", None)
    assert (found.documents, found.expected) == (before.documents, before.expected + 1)
    quills = await search(client, user_id, "Who keeps quills?")
    assert quills["index_lag"]["pending"] == 0 and quills["index_lag"]["stale"] is True

    await requeue_memories(runtime.background_sessionmaker, user_id=user_id)
    await delivered_everything(runtime)
    assert (await coverage.check()).state == "complete"
    quills = await search(client, user_id, "Who keeps quills?")
    hit = next(h for h in quills["results"] if h["memory"]["id"] == memory["id"])
    assert stage_rank(hit, "bm25") == 1 and quills["index_lag"]["stale"] is False
