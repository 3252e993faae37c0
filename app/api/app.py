"""The ASGI application: plugins, controllers, error handling, start-up and shutdown."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import anyio
import structlog
from litestar import Litestar, Router
from litestar.datastructures import State
from litestar.di import Provide
from litestar.openapi import OpenAPIConfig
from litestar.openapi.spec import Components, SecurityScheme
from litestar.plugins.prometheus import PrometheusConfig
from litestar.plugins.sqlalchemy import (
    AsyncSessionConfig,
    SQLAlchemyAsyncConfig,
    SQLAlchemyPlugin,
)

from app import __version__
from app.api.admin import TenantAdminController
from app.api.auth import API_KEY_HEADER, require_admin_key, require_api_key
from app.api.contract import StrictRequest
from app.api.dependencies import provide_runtime
from app.api.health import health, metrics_endpoint, ready
from app.api.imports import ImportController
from app.api.memories import MemoryController
from app.api.messages import MessageController
from app.api.problems import EXCEPTION_HANDLERS
from app.api.search import SearchController
from app.api.users import UserController
from app.config import DEV_API_KEY, Settings, get_settings
from app.console.pages import ConsoleLogin, ConsolePages
from app.db.roles import check_database_roles
from app.logging import configure_logging
from app.mcp_server.mount import mcp_endpoint
from app.runtime import Runtime

log = structlog.get_logger(__name__)
HTTP_METRICS = PrometheusConfig(
    app_name="cognis",
    prefix="cognis_http",
    group_path=True,
    exclude=["/metrics", "/health", "/ready"],
)


@contextlib.asynccontextmanager
async def _lifespan(app: Litestar) -> AsyncIterator[None]:
    runtime: Runtime = app.state.runtime
    settings = runtime.settings
    if settings.dev_key_enabled:
        log.warning(
            "auth.development_key_enabled",
            message="NO API KEY HASHES CONFIGURED: the public development key "
            f"'{DEV_API_KEY}' is accepted. Set COGNIS_API_KEY_HASHES before exposing "
            "this service.",
        )
    await check_database_roles(
        runtime.engine,
        runtime.background_engine,
        background=settings.relay_in_api or settings.ingest_worker_in_api,
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
    stop = asyncio.Event()
    relay_task = None
    if settings.relay_in_api:
        relay_task = asyncio.create_task(runtime.relay.run_forever(stop))
    ingest_task = None
    if settings.ingest_worker_in_api:
        ingest_task = asyncio.create_task(runtime.ingest_worker.run_forever(stop))
    log.info(
        "api.started",
        host=settings.host,
        port=settings.port,
        relay=settings.relay_in_api,
        ingest_worker=settings.ingest_worker_in_api,
        llm=settings.llm_model if settings.llm_enabled else None,
    )
    try:
        yield
    finally:
        stop.set()
        if relay_task is not None:
            await relay_task
        if ingest_task is not None:
            await ingest_task
        await runtime.close()


def create_app(settings: Settings | None = None) -> Litestar:
    settings = settings or get_settings()
    configure_logging(settings.log_level, settings.log_json)
    runtime = Runtime.build(settings)
    db_config = SQLAlchemyAsyncConfig(
        engine_instance=runtime.engine,
        session_config=AsyncSessionConfig(expire_on_commit=False),
        before_send_handler="autocommit",
        create_all=False,
        set_default_exception_handler=False,
    )
    mcp, mcp_lifespan = mcp_endpoint()
    api = Router(
        path="/",
        route_handlers=[
            MemoryController,
            ImportController,
            MessageController,
            SearchController,
            UserController,
        ],
        guards=[require_api_key],
        dependencies={"runtime": Provide(provide_runtime)},
        security=[{"apiKey": []}],
    )
    admin = Router(
        path="/",
        route_handlers=[TenantAdminController],
        guards=[require_admin_key],
        security=[{"apiKey": []}],
    )
    return Litestar(
        route_handlers=[
            health,
            ready,
            metrics_endpoint,
            api,
            admin,
            mcp,
            ConsoleLogin,
            ConsolePages,
        ],
        plugins=[SQLAlchemyPlugin(config=db_config)],
        exception_handlers=EXCEPTION_HANDLERS,
        request_class=StrictRequest,
        # cognis_http_requests_total etc., labelled by route template (not by user id).
        middleware=[HTTP_METRICS.middleware],
        lifespan=[_lifespan, mcp_lifespan],
        state=State({"runtime": runtime}),
        openapi_config=OpenAPIConfig(
            title="Cognis Memory",
            version=__version__,
            description="Long-term memory for conversational AI agents.",
            path="/schema",
            components=Components(
                security_schemes={
                    "apiKey": SecurityScheme(
                        type="apiKey", name=API_KEY_HEADER, security_scheme_in="header"
                    )
                }
            ),
        ),
    )
