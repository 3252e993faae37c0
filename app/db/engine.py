"""Async engine and session factory."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker, create_async_engine

from app.config import Settings
from app.db import tenant  # noqa: F401 (its listener sets each transaction's tenant)

# Session settings for every connection the service opens (startup parameters, so they also
# hold on managed Postgres where postgresql.conf is not ours). Measured at 10,000 memories:
# - plan_cache_mode: after five executions Postgres may switch a prepared statement to a
#   generic plan, which cannot know how many rows the user has; the custom plan kept the
#   near-duplicate query at 1.5 ms where the generic one took 16 ms.
# - jit: compiling expressions costs 5-60 ms on a request that runs for 10; short queries
#   never repay it.
SERVER_SETTINGS = {"plan_cache_mode": "force_custom_plan", "jit": "off"}


def application_name(process: str, purpose: str | None = None) -> str:
    """What `pg_stat_activity.application_name` says of a connection: `cognis-<process>`
    (api, relay, worker, migrate, or the command: reindex, import, ...), then its pool's
    purpose where a process has several (`-background`, `-replica`). Postgres keeps 63 bytes."""
    return f"cognis-{process}" + (f"-{purpose}" if purpose else "")


def create_engine(
    settings: Settings,
    url: str | None = None,
    *,
    connect_timeout_s: float | None = None,
    application: str = "cognis",
) -> AsyncEngine:
    """An engine for `url` (default: the service's database URL) with the service's settings;
    `connect_timeout_s` bounds a connection attempt (asyncpg's own default: 60 s);
    `application` names its connections in pg_stat_activity (`application_name`)."""
    server_settings = {**SERVER_SETTINGS, "application_name": application}
    connect_args: dict[str, object] = {"server_settings": server_settings}
    if connect_timeout_s is not None:
        connect_args["timeout"] = connect_timeout_s
    return create_async_engine(
        url or settings.database_url.get_secret_value(),
        pool_size=settings.db_pool_size,
        pool_pre_ping=True,
        # Parameters are user content (memory text, metadata, embeddings): an error's message
        # must not carry them into logs.
        hide_parameters=True,
        connect_args=connect_args,
    )


def create_sessionmaker(engine: AsyncEngine) -> async_sessionmaker:
    return async_sessionmaker(engine, expire_on_commit=False)
