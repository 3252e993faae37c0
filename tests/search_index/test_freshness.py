"""Read-your-writes: index lag in search responses, and the bounded wait for the BM25 index."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.config import Settings
from app.db.engine import create_engine, create_sessionmaker
from app.search_index.client import MemoryIndex, refresh_window_s
from app.search_index.outbox import user_index_lag
from app.search_index.relay import OutboxRelay
from tests.conftest import only_running
from tests.factories import create_memory, indexed_document, search, stage_rank

pytestmark = pytest.mark.usefixtures("ingest_worker")  # messages through the in-process API

# An event no relay will take for an hour: "pending" without racing the relays.
INSERT_HELD_EVENT = text(
    "INSERT INTO outbox (user_id, op, memory_id, payload, created_at, next_attempt_at) "
    "VALUES (:u, 'index', :m, '{}'::jsonb, now() - make_interval(secs => :age_s), "
    "now() + interval '1 hour') RETURNING id"
)


async def searchable(opensearch, index_name: str, memory_id: str) -> dict | None:
    """The document as *search* sees it (no refresh here): what the BM25 leg can find."""
    response = await opensearch.search(
        index=index_name, body={"query": {"ids": {"values": [memory_id]}}}
    )
    hits = response["hits"]["hits"]
    return hits[0]["_source"] if hits else None


async def test_index_lag_counts_this_users_pending_events_only(
    client, db, inprocess_api, monkeypatch, user_id, other_user_id
) -> None:
    # A refresh window of zero first: only undelivered events count (the memory's own,
    # delivered by the indexed search below, would otherwise count for a second or so).
    runtime_index = inprocess_api.app.state.runtime.index
    monkeypatch.setattr(runtime_index, "refresh_window_s", 0.0)
    memory = await create_memory(client, user_id, "I keep bees on the roof")
    fresh = await search(client, user_id, "bees", consistency="indexed")
    assert fresh["index_lag"] == {
        "pending": 0,
        "unrefreshed": 0,
        "oldest_pending_age_ms": None,
        "consistency": "indexed",
        "stale": False,
        "waited_ms": fresh["index_lag"]["waited_ms"],
    }
    assert fresh["index_lag"]["waited_ms"] >= 0

    async with db.begin() as connection:
        held = [
            (
                await connection.execute(
                    INSERT_HELD_EVENT, {"u": user_id, "m": memory["id"], "age_s": 2.0}
                )
            ).scalar_one()
        ]
        for _ in range(3):
            held.append(
                (
                    await connection.execute(
                        INSERT_HELD_EVENT, {"u": other_user_id, "m": uuid.uuid4(), "age_s": 60.0}
                    )
                ).scalar_one()
            )
    try:
        lagging = (await search(client, user_id, "bees"))["index_lag"]
        assert lagging["pending"] == 1
        assert 2000 <= lagging["oldest_pending_age_ms"] < 60_000
        assert lagging["stale"] is True
        assert lagging["consistency"] == "eventual"
        assert lagging["waited_ms"] is None
        without_bm25 = (await search(client, user_id, "bees", stages={"bm25": False}))["index_lag"]
        assert without_bm25["pending"] == 1
        assert without_bm25["stale"] is False
        other = (await search(client, other_user_id, "bees"))["index_lag"]
        assert other["pending"] == 3
        assert other["oldest_pending_age_ms"] >= 60_000

        # Delivered, but within the index's refresh window (an hour here, so certainly):
        # still pending for the BM25 leg.
        monkeypatch.setattr(runtime_index, "refresh_window_s", 3600.0)
        async with db.begin() as connection:
            await connection.execute(
                text("UPDATE outbox SET processed_at = now() WHERE id = :id"), {"id": held[0]}
            )
        unrefreshed = (await search(client, user_id, "bees"))["index_lag"]
        # Both: the memory's own event too, delivered by the indexed search within the hour
        # (that search's refresh made it searchable, but another request cannot know).
        assert (unrefreshed["pending"], unrefreshed["unrefreshed"]) == (2, 2)
        assert unrefreshed["oldest_pending_age_ms"] >= 2000
        assert unrefreshed["stale"] is True
        # An indexed wait refreshes the index: nothing delivered before it is pending then.
        waited = (await search(client, user_id, "bees", consistency="indexed"))["index_lag"]
        assert (waited["pending"], waited["unrefreshed"], waited["stale"]) == (0, 0, False)

        async with db.begin() as connection:
            await connection.execute(
                text(
                    "UPDATE outbox SET processed_at = now() - interval '2 hours' WHERE user_id = :u"
                ),
                {"u": user_id},
            )
        caught_up = (await search(client, user_id, "bees"))["index_lag"]
        assert (caught_up["pending"], caught_up["unrefreshed"]) == (0, 0)
        assert caught_up["oldest_pending_age_ms"] is None
        assert caught_up["stale"] is False
    finally:
        async with db.begin() as connection:
            await connection.execute(text("DELETE FROM outbox WHERE id = ANY(:ids)"), {"ids": held})


async def test_indexed_search_sees_a_write_no_relay_delivered(
    relay, client, opensearch, index_name, user_id
) -> None:
    with only_running():
        memory = await create_memory(client, user_id, "My neighbour's parrot is named Quetzalcoatl")
        eventual = await search(client, user_id, "Quetzalcoatl")
        assert eventual["index_lag"]["pending"] == 1
        assert eventual["index_lag"]["stale"] is True
        assert eventual["results"][0]["memory"]["id"] == memory["id"]  # the vector leg
        assert stage_rank(eventual["results"][0], "bm25") is None
        assert await indexed_document(opensearch, index_name, memory["id"]) is None

        indexed = await search(client, user_id, "Quetzalcoatl", consistency="indexed")
        top = indexed["results"][0]
        assert top["memory"]["id"] == memory["id"]
        assert stage_rank(top, "bm25") == 1
        assert indexed["index_lag"]["pending"] == 0
        assert indexed["index_lag"]["stale"] is False
        assert indexed["index_lag"]["waited_ms"] > 0


async def test_indexed_wait_gives_up_after_its_bound(api_without_opensearch, user_id) -> None:
    with only_running(api_without_opensearch):
        async with api_without_opensearch.client() as client:
            await create_memory(client, user_id, "The spare key is under the gnome")
            found = await search(
                client, user_id, "gnome", consistency="indexed", wait_timeout_ms=700
            )
            lag = found["index_lag"]
            assert lag["stale"] is True
            assert lag["pending"] == 1
            assert lag["waited_ms"] >= 700
            assert found["missing_legs"] == ["bm25"]
            assert found["results"], "the vector leg still answers"

            written = await client.post(
                f"/v1/users/{user_id}/memories?wait_for=indexed&wait_timeout_ms=300",
                json={"content": "The spare bike lock code is 4711"},
            )
            assert written.status_code == 201, written.text
            assert written.headers["X-Index-State"] == "pending"
            assert float(written.headers["X-Index-Wait-Ms"]) >= 300

            too_long = await client.post(
                f"/v1/users/{user_id}/search",
                json={"query": "gnome", "consistency": "indexed", "wait_timeout_ms": 6000},
            )
            assert too_long.status_code == 400, too_long.text


async def test_writes_with_wait_for_indexed_are_searchable_on_return(
    relay, client, opensearch, index_name, user_id
) -> None:
    with only_running():
        base = f"/v1/users/{user_id}/memories"
        unwaited = await create_memory(client, user_id, "I once rode a camel in Jaisalmer")

        created = await client.post(
            f"{base}?wait_for=indexed", json={"content": "My bonsai is a juniper"}
        )
        assert created.status_code == 201, created.text
        assert created.headers["X-Index-State"] == "indexed"
        memory = created.json()
        document = await searchable(opensearch, index_name, memory["id"])
        assert document is not None
        assert document["content"] == "My bonsai is a juniper"
        # The wait covers this write's own events, not the user's earlier pending ones.
        assert await indexed_document(opensearch, index_name, unwaited["id"]) is None

        patched = await client.patch(
            f"{base}/{memory['id']}?wait_for=indexed", json={"content": "My bonsai is a maple"}
        )
        assert patched.headers["X-Index-State"] == "indexed"
        new = await searchable(opensearch, index_name, patched.json()["version_id"])
        assert new is not None
        assert new["content"] == "My bonsai is a maple"
        old = await searchable(opensearch, index_name, memory["id"])
        assert old is not None
        assert old["is_current"] is False

        deleted = await client.delete(f"{base}/{patched.json()['id']}?wait_for=indexed")
        assert deleted.status_code == 200, deleted.text
        assert deleted.headers["X-Index-State"] == "indexed"
        gone = await searchable(opensearch, index_name, patched.json()["version_id"])
        assert gone is not None
        assert gone["is_current"] is False


async def test_messages_wait_for_indexed_after_the_job(
    relay, client, opensearch, index_name, user_id
) -> None:
    with only_running():
        url = f"/v1/users/{user_id}/messages"
        body = {"messages": [{"content": "I am allergic to hazelnuts"}]}
        refused = await client.post(f"{url}?wait_for=indexed", json=body)
        assert refused.status_code == 400, refused.text

        response = await client.post(f"{url}?wait=true&wait_for=indexed", json=body)
        assert response.status_code == 200, response.text
        assert response.headers["X-Index-State"] == "indexed"
        (message,) = response.json()["messages"]
        written = [d["memory_id"] for d in message["decisions"] if d["memory_id"]]
        assert written, message
        for memory_id in written:
            assert await searchable(opensearch, index_name, memory_id) is not None


@pytest.fixture
async def slow_refresh(
    migrated: dict[str, str], service_urls, index_name: str
) -> AsyncIterator[tuple[async_sessionmaker[AsyncSession], MemoryIndex, OutboxRelay]]:
    """A relay into an index of its own that refreshes once an hour: what it delivers is
    certainly not searchable until a refresh is asked for."""
    settings = Settings(
        database_url=migrated["COGNIS_WORKER_DATABASE_URL"],
        opensearch_url=service_urls.opensearch_url,
        opensearch_index=f"{index_name}-hourly",
        opensearch_refresh_interval="1h",
    )
    engine = create_engine(settings.store)
    sessionmaker = create_sessionmaker(engine)
    index = MemoryIndex(settings.store)
    await index.ensure_index()
    yield sessionmaker, index, OutboxRelay(sessionmaker, index, settings.relay, settings.store)
    await index.drop_index()
    await index.close()
    await engine.dispose()


async def test_a_delivered_event_the_index_has_not_refreshed_is_pending(
    slow_refresh, db, opensearch, index_name, user_id
) -> None:
    sessionmaker, index, relay = slow_refresh
    assert index.refresh_window_s is not None and index.refresh_window_s > 3600
    memory_id = uuid.uuid4()
    async with db.begin() as connection:
        event_id = (
            await connection.execute(INSERT_HELD_EVENT, {"u": user_id, "m": memory_id, "age_s": 0})
        ).scalar_one()
    report = await relay.run_once([event_id])
    assert report.delivered == 1
    hourly = f"{index_name}-hourly"
    assert await indexed_document(opensearch, hourly, str(memory_id)) is not None
    assert await searchable(opensearch, hourly, str(memory_id)) is None  # BM25 cannot see it

    async with sessionmaker() as session:
        lag = await user_index_lag(session, user_id, index.refresh_window_s)
        assert (lag.pending, lag.unrefreshed) == (1, 1)
        assert lag.oldest_pending_age_ms is not None
        # Without a scheduled refresh (-1), a delivered event stays unrefreshed too.
        assert (await user_index_lag(session, user_id, None)).unrefreshed == 1
        # Past the window it no longer counts.
        assert (await user_index_lag(session, user_id, 0.0)).pending == 0

    await index.refresh()
    assert await searchable(opensearch, hourly, str(memory_id)) is not None


def test_the_refresh_window_is_the_interval_plus_a_margin() -> None:
    assert refresh_window_s("250ms") == 1.25
    assert refresh_window_s("1h") == 3601.0
    assert refresh_window_s("-1") is None
    with pytest.raises(ValueError, match="time value"):
        refresh_window_s("soon")
