"""The background loops' pool pings a connection at checkout only when it sat idle: one used a
moment ago is taken as it is (no ping's three round trips), one idle longer is pinged and, when
the server dropped it, replaced before anyone uses it."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from unittest import mock

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from app.config import Settings
from app.db import engine as db_engine
from app.db.engine import create_engine, create_sessionmaker


@pytest.fixture
async def same_role(migrated: dict[str, str]) -> AsyncIterator[AsyncEngine]:
    """The worker role's own connection: a role may end its own sessions."""
    engine = create_async_engine(migrated["COGNIS_WORKER_DATABASE_URL"])
    yield engine
    await engine.dispose()


async def _drop_connections(engine: AsyncEngine, application: str) -> int:
    async with engine.begin() as connection:
        return int(
            await connection.scalar(
                text(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                    "WHERE application_name = :name"
                ),
                {"name": application},
            )
        )


def _pooled_engine(migrated: dict[str, str], application: str) -> AsyncEngine:
    with mock.patch.dict(os.environ, migrated, clear=True):
        store = Settings().store
    return create_engine(
        store,
        migrated["COGNIS_WORKER_DATABASE_URL"],
        application=application,
        ping_when_idle=True,
    )


async def test_a_connection_idle_in_the_pool_is_pinged_and_replaced_when_dropped(
    migrated: dict[str, str], same_role: AsyncEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(db_engine, "PING_AFTER_IDLE_S", 0.0)  # every checkout counts as idle
    application = f"ping-{uuid.uuid4().hex[:8]}"
    engine = _pooled_engine(migrated, application)
    sessions = create_sessionmaker(engine)
    try:
        async with sessions() as session:
            first = await session.scalar(text("SELECT pg_backend_pid()"))
        assert await _drop_connections(same_role, application) == 1

        async with sessions() as session:  # the ping finds it gone: a new connection
            second = await session.scalar(text("SELECT pg_backend_pid()"))

        assert second != first
    finally:
        await engine.dispose()


async def test_a_connection_used_a_moment_ago_is_not_pinged(
    migrated: dict[str, str], same_role: AsyncEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Proof that no ping was made: the dropped connection is met by the statement itself,
    which fails once; SQLAlchemy then replaces the pool's connections."""
    monkeypatch.setattr(db_engine, "PING_AFTER_IDLE_S", 3600.0)
    application = f"ping-{uuid.uuid4().hex[:8]}"
    engine = _pooled_engine(migrated, application)
    sessions = create_sessionmaker(engine)
    try:
        async with sessions() as session:
            await session.scalar(text("SELECT 1"))
        assert await _drop_connections(same_role, application) == 1

        with pytest.raises(DBAPIError):
            async with sessions() as session:
                await session.scalar(text("SELECT 1"))
        async with sessions() as session:
            assert await session.scalar(text("SELECT 2")) == 2
    finally:
        await engine.dispose()
