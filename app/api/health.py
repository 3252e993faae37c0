"""Liveness and readiness (no API key needed)."""

from __future__ import annotations

from typing import Any

from litestar import MediaType, Response, get
from litestar.datastructures import State
from litestar.openapi.datastructures import ResponseSpec
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from sqlalchemy import text

from app.api.auth import require_metrics_key
from app.metrics import REGISTRY
from app.search_index.outbox import pending_count
from app.search_index.relay import oldest_pending_age_s


@get("/health", tags=["health"], summary="Liveness: the process answers")
async def health() -> dict[str, str]:
    return {"status": "ok"}


@get(
    "/ready",
    tags=["health"],
    summary="Readiness: Postgres, OpenSearch, model, outbox backlog",
    responses={
        503: ResponseSpec(
            data_container=dict[str, Any],
            description="Not serving: Postgres is down or the model is not loaded yet; the "
            "body has the same checks.",
            generate_examples=False,
        )
    },
)
async def ready(state: State) -> Response[dict[str, Any]]:
    runtime = state.runtime
    checks: dict[str, Any] = {"model_loaded": runtime.models_loaded}
    try:
        # Every tenant's backlog: the background role sees all of it.
        async with runtime.background_sessionmaker() as session:
            await session.execute(text("SELECT 1"))
            checks["outbox_pending"] = await pending_count(session)
            checks["outbox_oldest_pending_s"] = await oldest_pending_age_s(session)
        checks["postgres"] = "up"
    except Exception as exc:
        checks["postgres"] = f"down: {type(exc).__name__}"
    checks["opensearch"] = "up" if await runtime.index.ping() else "down"
    serving = checks["postgres"] == "up" and checks["model_loaded"]
    # Without OpenSearch the service still serves (vector-only search, outbox holds writes).
    status = (
        "ready"
        if serving and checks["opensearch"] == "up"
        else ("degraded" if serving else "unavailable")
    )
    return Response({"status": status, **checks}, status_code=200 if serving else 503)


@get(
    "/metrics",
    tags=["health"],
    summary="Prometheus metrics (behind COGNIS_METRICS_KEY_HASHES when set)",
    media_type=MediaType.TEXT,
    guards=[require_metrics_key],
)
async def metrics_endpoint() -> Response[bytes]:
    return Response(generate_latest(REGISTRY), media_type=CONTENT_TYPE_LATEST)
