"""Async engine and session factory."""

from __future__ import annotations

import time
import uuid
from typing import Any

from sqlalchemy import event
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)
from sqlalchemy.orm import Session

from app.config import StoreSettings
from app.db import tenant  # noqa: F401 (its listener sets each transaction's tenant)
from app.tracing.setup import trace_engine

# Session settings for every connection the service opens (startup parameters, so they also
# hold on managed Postgres where postgresql.conf is not ours). Measured at 10,000 memories:
# - plan_cache_mode: after five executions Postgres may switch a prepared statement to a
#   generic plan, which cannot know how many rows the user has; the custom plan kept the
#   near-duplicate query at 1.5 ms where the generic one took 16 ms.
# - jit: compiling expressions costs 5-60 ms on a request that runs for 10; short queries
#   never repay it.
# Behind a transaction-mode pooler no startup parameter reaches the server connection a
# transaction gets: there the roles carry them (scripts/service-roles.sql).
SERVER_SETTINGS = {"plan_cache_mode": "force_custom_plan", "jit": "off"}

# A connection is pinged at checkout only when it has been back in the pool this long: one
# used a moment ago was alive then. SQLAlchemy's pool_pre_ping pings at every checkout, and
# with asyncpg a ping is three round trips (BEGIN, the ping, ROLLBACK): 0.4-0.7 ms each time
# on the 2-core VM, as much as the short transaction it guards (docs/benchmarks/ingestion.md).
# A busy pool's connections are reused within milliseconds; should the server go away in
# between, the statement fails once and SQLAlchemy then replaces every pooled connection: so
# only for the background loops' engine, whose failed statement is a retried attempt.
PING_AFTER_IDLE_S = 1.0
_CHECKED_IN_AT = "cognis_checked_in_at"


def _pooled_statement_name() -> str:
    """A prepared statement's name no other client of the pooler's server connection uses."""
    return f"__cognis_{uuid.uuid4().hex}__"


def application_name(process: str, purpose: str | None = None) -> str:
    """What `pg_stat_activity.application_name` says of a connection: `cognis-<process>`
    (api, relay, worker, migrate, or the command: reindex, import, ...), then its pool's
    purpose where a process has several (`-background`, `-replica`). Postgres keeps 63 bytes."""
    return f"cognis-{process}" + (f"-{purpose}" if purpose else "")


def worker_url(store: StoreSettings) -> str | None:
    """The worker role's URL (a member of cognis_background), None when the service's role
    does its background work too: what sees every tenant's rows with no tenant set, as the
    workers and the tenant administration need (row-level security)."""
    return store.worker_database_url.get_secret_value() if store.worker_database_url else None


def create_engine(
    store: StoreSettings,
    url: str | None = None,
    *,
    connect_timeout_s: float | None = None,
    application: str = "cognis",
    ping_when_idle: bool = False,
) -> AsyncEngine:
    """An engine for `url` (default: the service's database URL) with the service's settings;
    `connect_timeout_s` bounds a connection attempt (asyncpg's own default: 60 s);
    `application` names its connections in pg_stat_activity (`application_name`);
    `ping_when_idle`: ping a connection at checkout only when it was idle (PING_AFTER_IDLE_S),
    for the background loops, which take a failed statement as a failed attempt and go on;
    otherwise at every checkout (SQLAlchemy's pool_pre_ping), so a request never meets a
    connection the server dropped.

    With `COGNIS_DB_POOLER=transaction` (PgBouncer in transaction mode), consecutive
    transactions of one connection may run on different server connections: asyncpg caches
    no statement, names each one uniquely (SQLAlchemy's recipe for PgBouncer), and only
    `application_name`, which PgBouncer passes on, is sent at connect."""
    connect_args: dict[str, object]
    if store.db_pooler == "transaction":
        connect_args = {
            "server_settings": {"application_name": application},
            "statement_cache_size": 0,
            "prepared_statement_cache_size": 0,
            "prepared_statement_name_func": _pooled_statement_name,
        }
    else:
        connect_args = {"server_settings": {**SERVER_SETTINGS, "application_name": application}}
    if connect_timeout_s is not None:
        connect_args["timeout"] = connect_timeout_s
    engine = create_async_engine(
        url or store.database_url.get_secret_value(),
        pool_size=store.db_pool_size,
        pool_pre_ping=not ping_when_idle,
        # Parameters are user content (memory text, metadata, embeddings): an error's message
        # must not carry them into logs.
        hide_parameters=True,
        connect_args=connect_args,
    )
    if ping_when_idle:
        _ping_when_idle(engine, PING_AFTER_IDLE_S)
    # A span per statement while tracing is on (the statement's text, never its parameters).
    trace_engine(engine)
    return engine


def _ping_when_idle(engine: AsyncEngine, idle_s: float) -> None:
    """Pessimistic disconnect handling, for the connections that were idle: a checkout of one
    back in the pool for `idle_s` or more pings it first; one that does not answer is replaced
    (DisconnectionError: the pool connects anew and tries again)."""
    sync_engine = engine.sync_engine

    @event.listens_for(sync_engine.pool, "checkin")
    def _checked_in(dbapi_connection: Any, record: Any) -> None:
        record.info[_CHECKED_IN_AT] = time.monotonic()

    @event.listens_for(sync_engine.pool, "checkout")
    def _checked_out(dbapi_connection: Any, record: Any, proxy: Any) -> None:
        checked_in = record.info.get(_CHECKED_IN_AT)
        if checked_in is None or time.monotonic() - checked_in < idle_s:
            return  # just connected, or used a moment ago
        try:
            sync_engine.dialect.do_ping(dbapi_connection)
        except Exception as exc:
            raise DisconnectionError(f"a pooled connection did not answer: {exc}") from exc


_OPENED_AT = "cognis_opened_at"


class StampedSession(Session):
    """A session that knows when it was opened (the process's monotonic clock): for a request,
    its start, before any model work and before its first statement. An erase refuses the
    writes that began before it by that instant (app/memories/user_lock.py)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.info[_OPENED_AT] = time.monotonic()


def opened_at(session: AsyncSession | Session) -> float | None:
    """When a StampedSession was opened (time.monotonic()); None for another session."""
    opened = session.info.get(_OPENED_AT)
    return opened if isinstance(opened, float) else None


def create_sessionmaker(engine: AsyncEngine) -> async_sessionmaker:
    return async_sessionmaker(engine, expire_on_commit=False, sync_session_class=StampedSession)
