"""Liveness and readiness (no API key needed)."""

from __future__ import annotations

from typing import Any

import prometheus_client
from litestar import MediaType, Response, get
from litestar.datastructures import State
from litestar.openapi.datastructures import ResponseSpec
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from sqlalchemy import text

from app import metrics
from app.api.auth import require_metrics_key
from app.db.retention import overdue_seconds
from app.memories.batch_jobs import BatchJobRepository
from app.memories.entities import pending_entities
from app.memories.sentence_backfill import pending_sentences
from app.runtime import Runtime
from app.search_index.coverage import readiness as index_readiness
from app.search_index.outbox import pending_count
from app.search_index.relay import oldest_pending_age_s


async def _backlogs(
    runtime: Runtime, sentences: bool = False
) -> tuple[int, float | None, int | None]:
    """Undelivered outbox events, the age of the oldest, in seconds (None: none pending), and
    with `sentences` the memories waiting for their sentence vectors: every tenant's
    backlogs, which the background role sees, in one session."""
    async with runtime.background_sessionmaker() as session:
        pending, oldest_s = await pending_count(session), await oldest_pending_age_s(session)
        return pending, oldest_s, await pending_sentences(session) if sentences else None


async def _model_state(runtime: Runtime) -> str:
    """ "up", or why a model cannot embed now (the model service unreachable, still loading)."""
    embedders = {id(e): e for e in (runtime.embedder, runtime.query_embedder)}.values()
    for embedder in embedders:
        if (why := await embedder.unready()) is not None:
            return why
    return "up"


@get("/health", tags=["health"], summary="Liveness: the process answers")
async def health() -> dict[str, str]:
    return {"status": "ok"}


@get(
    "/ready",
    tags=["health"],
    summary="Readiness: Postgres, OpenSearch, model, outbox backlog, sentences to embed, "
    "batch jobs not yet written",
    description="`status`: `ready`; `degraded` (200: still serving, `search` says how: "
    "`bm25-only` while the model service cannot embed, so writes wait or answer 503 and "
    "searches use BM25 alone; `vector-only` while OpenSearch is down or the index behind); "
    "`starting` (503: this process is still loading its models); `down` (503: Postgres "
    "unreachable, nothing can be served).",
    responses={
        503: ResponseSpec(
            data_container=dict[str, Any],
            description="Down (Postgres unreachable) or starting (models still loading); the "
            "body has the same checks.",
            generate_examples=False,
        )
    },
)
async def ready(state: State) -> Response[dict[str, Any]]:
    runtime = state.runtime
    checks: dict[str, Any] = {"model_loaded": runtime.models_loaded}
    try:
        async with runtime.sessionmaker() as session:
            await session.execute(text("SELECT 1"))
        (
            checks["outbox_pending"],
            checks["outbox_oldest_pending_s"],
            checks["sentences_pending"],
        ) = await _backlogs(runtime, sentences=True)
        async with runtime.background_sessionmaker() as session:
            checks["batch_jobs_open"] = await BatchJobRepository(session).open_count()
            # Current memories the entity worker has not read yet (docs/entities.md); not
            # shown where no worker reads them (COGNIS_ENTITIES=false).
            if runtime.settings.retrieval.entities:
                checks["entities_pending"] = await pending_entities(session)
        checks["postgres"] = "up"
    except Exception as exc:
        checks["postgres"] = f"down: {type(exc).__name__}"
    checks["opensearch"] = "up" if await runtime.index.ping() else "down"
    # The last coverage check (cached): an index behind Postgres is degraded, not unavailable.
    checks.update(index_readiness(runtime.index_coverage.latest))
    checks["model"] = await _model_state(runtime)
    status, search = serving_state(checks)
    return Response(
        {"status": status, "search": search, **checks},
        status_code=503 if status in ("down", "starting") else 200,
    )


def serving_state(checks: dict[str, Any]) -> tuple[str, str]:
    """`/ready`'s status and how searches are answered, from its checks. Only Postgres down
    is "down" (503): without the model, searches answer from BM25 alone and messages wait in
    the queue (they are applied once it is back); without OpenSearch, from the vectors alone.
    A load balancer that took such an instance out would take out every instance at once."""
    if checks["postgres"] != "up":
        return "down", "none"
    if not checks["model_loaded"]:  # this process still loading its models: not yet serving
        return "starting", "none"
    bm25 = checks["opensearch"] == "up" and checks.get("index") != "behind"
    if checks["model"] != "up":
        return "degraded", "bm25-only" if checks["opensearch"] == "up" else "none"
    return ("ready", "full") if bm25 else ("degraded", "vector-only")


async def _observe_stores(runtime: Runtime) -> None:
    """Scrape-time gauges: the outbox backlog and what retention has left overdue from
    Postgres, node CPU from OpenSearch."""
    pending, oldest_s, _ = await _backlogs(runtime)
    metrics.OUTBOX_PENDING.set(pending)
    metrics.OUTBOX_OLDEST_PENDING_SECONDS.set(oldest_s or 0.0)
    async with runtime.background_sessionmaker() as session:
        for table, seconds in (await overdue_seconds(session, runtime.settings.retention)).items():
            metrics.RETENTION_OVERDUE_SECONDS.labels(table=table).set(seconds)
    try:
        stats = await runtime.index.client.nodes.stats(metric="os")
    except Exception:
        metrics.OPENSEARCH_UP.set(0)
        return
    metrics.OPENSEARCH_UP.set(1)
    for node in stats.get("nodes", {}).values():
        cpu = node.get("os", {}).get("cpu", {}).get("percent")
        if cpu is not None:
            metrics.OPENSEARCH_CPU_PERCENT.labels(node=node.get("name", "?")).set(cpu)


@get(
    "/metrics",
    tags=["health"],
    summary="Prometheus metrics (behind COGNIS_METRICS_KEY_HASHES when set)",
    media_type=MediaType.TEXT,
    guards=[require_metrics_key],
)
async def metrics_endpoint(state: State) -> Response[bytes]:
    await _observe_stores(state.runtime)
    # The service's own registry, then the default one: HTTP requests (Litestar's middleware)
    # and the process collectors.
    body = generate_latest(metrics.REGISTRY) + generate_latest(prometheus_client.REGISTRY)
    return Response(body, media_type=CONTENT_TYPE_LATEST)
