"""The ASGI application of `python -m app serve`: the REST API, the web console and the MCP
endpoint, side by side on one runtime, with the session plugin, error handling, metrics and the
process's start-up and shutdown. The three never import each other; they meet here."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import anyio
import structlog
from litestar import Litestar
from litestar.datastructures import State
from litestar.plugins.prometheus import PrometheusConfig
from litestar.plugins.sqlalchemy import (
    SQLAlchemyAsyncConfig,
    SQLAlchemyPlugin,
    async_autocommit_handler_maker,
)

from app.api.auth import require_api_key
from app.api.consistency import commit_then_wait
from app.api.contract import StrictRequest, refuse_unstorable_parameters
from app.api.deadlines import DEADLINE_HANDLERS
from app.api.problems import EXCEPTION_HANDLERS
from app.api.routes import api_route_handlers, openapi_config
from app.config import DEV_API_KEY, Settings, get_settings
from app.console.login import ConsoleLogin
from app.console.pages import ConsolePages
from app.db.roles import check_database_roles
from app.logging import configure_logging
from app.mcp_server.mount import mcp_endpoint
from app.runtime import Runtime
from app.tracing.web import request_tracing, route_naming

log = structlog.get_logger(__name__)
# Probes and scrapes: neither counted per route nor traced.
UNOBSERVED_PATHS = ["/metrics", "/health", "/ready"]
HTTP_METRICS = PrometheusConfig(
    app_name="cognis",
    prefix="cognis_http",
    group_path=True,
    exclude=UNOBSERVED_PATHS,
)


@contextlib.asynccontextmanager
async def _lifespan(app: Litestar) -> AsyncIterator[None]:
    runtime: Runtime = app.state.runtime
    settings = runtime.settings
    if settings.keys.dev_key_enabled:
        log.warning(
            "auth.development_key_enabled",
            message="NO API KEY HASHES CONFIGURED: the public development key "
            f"'{DEV_API_KEY}' is accepted. Set COGNIS_API_KEY_HASHES before exposing "
            "this service.",
        )
    await check_database_roles(
        runtime.engine,
        runtime.background_engine,
        background=settings.relay.relay_in_api or settings.ingest.ingest_worker_in_api,
    )
    await anyio.to_thread.run_sync(runtime.load_models)
    # Before readiness: the first memory without a category must not wait for training.
    await runtime.classifier.prepare()
    if runtime.cross_encoder is not None:
        await anyio.to_thread.run_sync(runtime.cross_encoder.load)
    else:
        log.info("retrieval.cross_encoder_skipped", reason="COGNIS_CROSS_ENCODER_MODEL not set")
    try:
        await runtime.index.ensure_index()
    except Exception as exc:
        log.warning("search_index.unavailable_at_startup", error=str(exc))
    try:
        async with runtime.background(
            relay=settings.relay.relay_in_api,
            ingest_worker=settings.ingest.ingest_worker_in_api,
            index_check=True,
        ):
            log.info(
                "api.started",
                host=settings.api.host,
                port=settings.api.port,
                relay=settings.relay.relay_in_api,
                ingest_worker=settings.ingest.ingest_worker_in_api,
                llm=settings.llm.llm_model if settings.llm.llm_enabled else None,
            )
            yield
    finally:
        await runtime.close()


def create_app(settings: Settings | None = None) -> Litestar:
    settings = settings or get_settings()
    configure_logging(settings.api.log_level, settings.api.log_json)
    runtime = Runtime.build(settings, process="api")
    db_config = SQLAlchemyAsyncConfig(
        engine_instance=runtime.engine,
        # The runtime's factory (expire_on_commit off, StampedSession: an erase refuses the
        # writes of requests that began before it, app/memories/user_lock.py).
        session_maker=runtime.sessionmaker,
        create_all=False,
        set_default_exception_handler=False,
    )
    # One session per request, committed by the framework before the response starts; then
    # the index wait a write asked for (?wait_for=indexed). The commit reads the session under
    # this config's own scope key: a second app in one process gets a suffixed key (the
    # plugin keeps keys unique per process), and a handler on the default key would find no
    # session there, so that app's writes would answer 2xx and never commit.
    db_config.before_send_handler = commit_then_wait(
        async_autocommit_handler_maker(session_scope_key=db_config.session_scope_key)
    )
    mcp, mcp_lifespan = mcp_endpoint(guards=[require_api_key])
    return Litestar(
        route_handlers=[*api_route_handlers(), mcp, ConsoleLogin, ConsolePages],
        # A span per request (Litestar's OpenTelemetry plugin) while tracing is on.
        plugins=[SQLAlchemyPlugin(config=db_config), *request_tracing(UNOBSERVED_PATHS)],
        exception_handlers={**EXCEPTION_HANDLERS, **DEADLINE_HANDLERS},
        request_class=StrictRequest,
        # Every route's query and path parameters (no layer below sets its own hook).
        before_request=refuse_unstorable_parameters,
        # cognis_http_requests_total etc., labelled by route template (not by user id).
        middleware=[HTTP_METRICS.middleware, *route_naming()],
        lifespan=[_lifespan, mcp_lifespan],
        state=State({"runtime": runtime}),
        openapi_config=openapi_config(),
    )
