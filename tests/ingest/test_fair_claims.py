"""Claims are fair between tenants: a tenant's large backlog (here 10,000 messages over 100
users) does not hold up another tenant's next message beyond the first round of claims.
Counted in claims, not timed."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from typing import Any, cast
from unittest import mock

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker, create_async_engine

from app.config import Settings
from app.ingest.repository import Claim
from app.ingest.worker import IngestWorker

BACKLOG = 10_000
BACKLOG_USERS = 100
BATCH = 32


@pytest.fixture
async def tenants(db: AsyncEngine) -> AsyncIterator[list[uuid.UUID]]:
    """New tenants, removed with all their rows afterwards."""
    created: list[uuid.UUID] = []
    yield created
    async with db.begin() as connection:
        for tenant_id in created:
            await connection.execute(
                text("SELECT set_config('cognis.tenant_id', :t, true)"), {"t": str(tenant_id)}
            )
            await connection.execute(text("DELETE FROM messages"))  # tasks go with them
        await connection.execute(text("DELETE FROM tenants WHERE id = ANY(:ids)"), {"ids": created})


async def _new_tenant(db: AsyncEngine) -> uuid.UUID:
    tenant_id = uuid.uuid4()
    async with db.begin() as connection:
        await connection.execute(
            text("INSERT INTO tenants (id, name) VALUES (:id, :name)"),
            {"id": tenant_id, "name": f"fair-{tenant_id.hex[:8]}"},
        )
    return tenant_id


async def _enqueue(
    db: AsyncEngine, tenant_id: uuid.UUID, queue: str, users: int, count: int, after: int = 0
) -> str:
    """`count` queued messages spread over `users` users, 1 ms apart from `after` ms past a
    day ago, all due; returns the users' id prefix."""
    prefix = f"{queue}-{tenant_id.hex[:8]}-"
    params = {
        "t": str(tenant_id),
        "q": queue,
        "n": count,
        "users": users,
        "prefix": prefix,
        "after": after,
    }
    async with db.begin() as connection:
        await connection.execute(text("SELECT set_config('cognis.tenant_id', :t, true)"), params)
        await connection.execute(
            text(
                "INSERT INTO messages (id, user_id, content, sent_at)"
                " SELECT gen_random_uuid(), :prefix || (i % :users), 'turn ' || i,"
                "  now() - interval '1 day' + (:after + i) * interval '1 ms'"
                " FROM generate_series(1, :n) AS i"
            ),
            params,
        )
        await connection.execute(
            text(
                "INSERT INTO ingest_tasks (message_id, job_id, user_id, queue, sent_at,"
                " available_at) SELECT id, id, user_id, :q, sent_at, sent_at FROM messages"
                " WHERE user_id LIKE :prefix || '%'"
            ),
            params,
        )
    return prefix


@pytest.fixture
async def worker_engine(migrated: dict[str, str]) -> AsyncIterator[AsyncEngine]:
    engine = create_async_engine(migrated["COGNIS_WORKER_DATABASE_URL"])
    yield engine
    await engine.dispose()


async def test_a_tenants_backlog_does_not_delay_another_tenants_next_message(
    migrated: dict[str, str],
    db: AsyncEngine,
    worker_engine: AsyncEngine,
    tenants: list[uuid.UUID],
) -> None:
    queue = f"fair-{uuid.uuid4().hex[:8]}"  # no running worker takes these
    busy, quiet = await _new_tenant(db), await _new_tenant(db)
    tenants.extend([busy, quiet])
    await _enqueue(db, busy, queue, BACKLOG_USERS, BACKLOG)
    # Sent after the whole backlog: oldest-first would serve it after 100 other heads.
    await _enqueue(db, quiet, queue, 1, 1, after=BACKLOG)
    worker = _claiming_worker(migrated, worker_engine, queue, 32, 1)

    first_round = [_one(await worker.claim()) for _ in range(2)]  # two tenants have work

    claims = [c for c in first_round if c is not None]
    assert {c.tenant_id for c in claims} == {busy, quiet}
    (from_quiet,) = [c for c in claims if c.tenant_id == quiet]
    assert len(from_quiet.tasks) == 1
    (from_busy,) = [c for c in claims if c.tenant_id == busy]
    # The busy tenant's claim is one user's oldest messages, in order, as one batch.
    assert len(from_busy.tasks) == BATCH
    sent = await _sent_at(db, busy, [t.message_id for t in from_busy.tasks])
    assert sent == sorted(sent)
    # Turns go on: the next claims serve the busy tenant's other users, one each.
    later = [_one(await worker.claim()) for _ in range(3)]
    assert all(c is not None and c.tenant_id == busy for c in later)
    users = {from_busy.user_id, *(c.user_id for c in later if c is not None)}
    assert len(users) == 4


def _claiming_worker(
    migrated: dict[str, str], engine: AsyncEngine, queue: str, messages: int, users: int
) -> IngestWorker:
    """A worker that only claims (no pipeline), on `queue`, claims of at most `messages`
    messages of at most `users` users. Leases outlast the test: a claim made here must not
    lapse (and be taken again) however slowly a loaded machine runs the claims after it."""
    env = {
        **migrated,
        "COGNIS_INGEST_QUEUE": queue,
        "COGNIS_INGEST_CLAIM_MAX_MESSAGES": str(messages),
        "COGNIS_INGEST_CLAIM_MAX_USERS": str(users),
        "COGNIS_INGEST_LEASE_S": "3600",
    }
    with mock.patch.dict(os.environ, env, clear=True):
        settings = Settings()
    return IngestWorker(async_sessionmaker(engine), cast(Any, None), settings.ingest)


def _one(claims: list[Claim]) -> Claim | None:
    """The user's batch of a claim of at most one user."""
    assert len(claims) <= 1
    return claims[0] if claims else None


async def test_a_claim_takes_several_users_of_one_tenant_each_in_order(
    migrated: dict[str, str],
    db: AsyncEngine,
    worker_engine: AsyncEngine,
    tenants: list[uuid.UUID],
) -> None:
    """Users grouped in one claim (one transaction, one model call later), never two tenants
    in one: the other tenant's users make the next claim; each user's batch in send order."""
    queue = f"group-{uuid.uuid4().hex[:8]}"
    first, second = await _new_tenant(db), await _new_tenant(db)
    tenants.extend([first, second])
    await _enqueue(db, first, queue, 5, 15)  # 5 users, 3 messages each
    await _enqueue(db, second, queue, 2, 4, after=100)
    worker = _claiming_worker(migrated, worker_engine, queue, 32, 4)

    claims = [await worker.claim() for _ in range(4)]

    # At most 4 users a claim, one tenant each: the first tenant's 5 users make two claims.
    assert sorted(len(c) for c in claims[:2]) == [2, 4]
    assert [c.tenant_id for c in claims[2]] == [first]
    assert claims[3] == []
    for group in claims[:3]:
        assert len({c.tenant_id for c in group}) == 1
        assert len({c.token for c in group}) == 1  # one lease for the group
        assert len({c.user_id for c in group}) == len(group)
    assert claims[0][0].tenant_id != claims[1][0].tenant_id  # tenants take turns
    assert {claims[0][0].tenant_id, claims[1][0].tenant_id} == {first, second}
    users = [c for group in claims for c in group]
    assert len({(c.tenant_id, c.user_id) for c in users}) == 7
    for claim in users:
        assert len(claim.tasks) == (3 if claim.tenant_id == first else 2)
        sent = await _sent_at(db, claim.tenant_id, claim.message_ids)
        assert sent == sorted(sent)


async def test_a_claim_keeps_to_its_message_limit_and_each_user_keeps_its_head(
    migrated: dict[str, str],
    db: AsyncEngine,
    worker_engine: AsyncEngine,
    tenants: list[uuid.UUID],
) -> None:
    queue = f"group-{uuid.uuid4().hex[:8]}"
    tenant = await _new_tenant(db)
    tenants.append(tenant)
    await _enqueue(db, tenant, queue, 3, 30)  # 3 users, 10 messages each
    worker = _claiming_worker(migrated, worker_engine, queue, 12, 3)

    group = await worker.claim()

    assert len(group) == 3
    assert sum(len(c.tasks) for c in group) == 12
    assert all(c.tasks for c in group)
    # The oldest head's user fills the room first; a later user keeps its head at least.
    assert [len(c.tasks) for c in group] == [10, 1, 1]


async def _sent_at(db: AsyncEngine, tenant_id: uuid.UUID, ids: list[uuid.UUID]) -> list[Any]:
    async with db.begin() as connection:
        await connection.execute(
            text("SELECT set_config('cognis.tenant_id', :t, true)"), {"t": str(tenant_id)}
        )
        result = await connection.execute(
            text("SELECT message_id, sent_at FROM ingest_tasks WHERE message_id = ANY(:ids)"),
            {"ids": ids},
        )
        sent = dict(result.tuples().all())
    return [sent[i] for i in ids]  # in the claim's order
