"""The relay in process: bulk requests bounded in size, and waits that see other relays."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from unittest import mock

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.config import Settings
from app.db.engine import create_engine, create_sessionmaker
from app.db.tenant import DEFAULT_TENANT_ID
from app.search_index import relay as relay_module
from app.search_index.client import MemoryIndex
from app.search_index.freshness import wait_until_indexed
from app.search_index.relay import OutboxRelay

# Held an hour: the relay loops of API processes in this test session leave these alone.
# Written as the background role with no tenant set, so the row names its tenant itself.
INSERT_EVENT = text(
    "INSERT INTO outbox (tenant_id, user_id, op, memory_id, payload, next_attempt_at) "
    "VALUES (:t, :u, 'index', :m, CAST(:doc AS jsonb), now() + interval '1 hour') RETURNING id"
)


@dataclass
class RelayParts:
    engine: AsyncEngine
    index: MemoryIndex
    relay: OutboxRelay


@pytest.fixture
async def relay_parts(
    migrated: dict[str, str], service_urls, index_name: str
) -> AsyncIterator[RelayParts]:
    settings = Settings(
        database_url=migrated["COGNIS_WORKER_DATABASE_URL"],
        opensearch_url=service_urls.opensearch_url,
        opensearch_index=index_name,
        opensearch_bulk_max_docs=3,
        opensearch_bulk_concurrency=2,
        index_wait_poll_ms=20,
    )
    engine = create_engine(settings.store)
    index = MemoryIndex(settings.store)
    await index.ensure_index()
    yield RelayParts(
        engine,
        index,
        OutboxRelay(create_sessionmaker(engine), index, settings.relay, settings.store),
    )
    await index.close()
    await engine.dispose()


def document(user_id: str, content: str) -> str:
    return (
        f'{{"user_id": "{user_id}", "content": "{content}", "scope": "USER", '
        '"is_current": true, "category": "hobbies"}'
    )


async def insert_events(engine: AsyncEngine, user_id: str, count: int) -> list[tuple[int, str]]:
    events = []
    async with engine.begin() as connection:
        for i in range(count):
            memory_id = str(uuid.uuid4())
            event_id = (
                await connection.execute(
                    INSERT_EVENT,
                    {
                        "t": DEFAULT_TENANT_ID,
                        "u": user_id,
                        "m": memory_id,
                        "doc": document(user_id, f"note {i}"),
                    },
                )
            ).scalar_one()
            events.append((event_id, memory_id))
    return events


async def test_a_batch_goes_out_as_bounded_bulk_requests(relay_parts, opensearch, user_id) -> None:
    parts = relay_parts
    sizes: list[int] = []
    send = parts.index.bulk_index

    async def recording_bulk_index(items):
        sizes.append(len(items))
        return await send(items)

    parts.index.bulk_index = recording_bulk_index  # type: ignore[method-assign]
    events = await insert_events(parts.engine, user_id, 7)

    report = await parts.relay.run_once([event_id for event_id, _ in events])

    assert report.delivered == 7
    assert sorted(sizes) == [1, 3, 3]
    for _, memory_id in events:
        stored = await opensearch.get(index=parts.index.name, id=memory_id, ignore=[404])
        assert stored.get("found"), memory_id


async def test_a_wait_sees_a_delivery_by_another_relay(relay_parts, opensearch, user_id) -> None:
    parts = relay_parts
    ((event_id, memory_id),) = await insert_events(parts.engine, user_id, 1)
    async with parts.engine.connect() as other_relay:
        # Another relay has claimed the event: the waiter must skip it and watch the outbox.
        transaction = await other_relay.begin()
        await other_relay.execute(
            text("SELECT id FROM outbox WHERE id = :id FOR UPDATE"), {"id": event_id}
        )
        # The waiter has looked at the outbox and found the event still undelivered.
        watched = asyncio.Event()
        undelivered = relay_module.outbox.undelivered

        async def watching(session, ids):
            remaining = await undelivered(session, ids)
            if event_id in remaining:
                watched.set()
            return remaining

        with mock.patch.object(relay_module.outbox, "undelivered", watching):
            waiting = asyncio.create_task(
                wait_until_indexed(create_sessionmaker(parts.engine), parts.relay, user_id, 10.0)
            )
            await asyncio.wait_for(watched.wait(), timeout=10)
        assert not waiting.done()

        await parts.index.bulk_index([(memory_id, event_id, {"user_id": user_id, "content": "x"})])
        await other_relay.execute(
            text("UPDATE outbox SET processed_at = now() WHERE id = :id"), {"id": event_id}
        )
        await transaction.commit()

    outcome = await asyncio.wait_for(waiting, timeout=10)
    assert outcome.indexed is True
    assert outcome.waited_ms < 10_000
    # Searchable at once: the waiter refreshed the index after the other relay's delivery.
    hits = await opensearch.search(
        index=parts.index.name, body={"query": {"ids": {"values": [memory_id]}}}
    )
    assert [hit["_id"] for hit in hits["hits"]["hits"]] == [memory_id]


async def test_a_wait_gives_up_at_its_bound(relay_parts, user_id) -> None:
    parts = relay_parts
    ((event_id, _),) = await insert_events(parts.engine, user_id, 1)
    async with parts.engine.connect() as other_relay:
        transaction = await other_relay.begin()
        await other_relay.execute(
            text("SELECT id FROM outbox WHERE id = :id FOR UPDATE"), {"id": event_id}
        )
        outcome = await wait_until_indexed(
            create_sessionmaker(parts.engine), parts.relay, user_id, 0.3
        )
        await transaction.rollback()
    assert outcome.indexed is False
    assert outcome.waited_ms >= 300
    async with parts.engine.begin() as connection:
        await connection.execute(text("DELETE FROM outbox WHERE id = :id"), {"id": event_id})
