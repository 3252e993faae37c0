"""Prometheus metrics for retrieval: one histogram per stage, one for the whole request."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

REGISTRY = CollectorRegistry()
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.25, 0.5, 1.0, 2.5)

STAGE_SECONDS = Histogram(
    "cognis_retrieval_stage_seconds",
    "Duration of each retrieval stage.",
    ["stage"],
    buckets=BUCKETS,
    registry=REGISTRY,
)
REQUEST_SECONDS = Histogram(
    "cognis_retrieval_seconds",
    "Duration of a whole retrieval request (server side).",
    buckets=BUCKETS,
    registry=REGISTRY,
)
MISSING_LEG = Counter(
    "cognis_retrieval_missing_leg_total",
    "Searches answered without one of their legs.",
    ["leg"],
    registry=REGISTRY,
)


def observe(durations_ms: dict[str, float], total_ms: float, missing_legs: list[str]) -> None:
    for stage, ms in durations_ms.items():
        STAGE_SECONDS.labels(stage=stage.removesuffix("_ms")).observe(ms / 1000)
    REQUEST_SECONDS.observe(total_ms / 1000)
    for leg in missing_legs:
        MISSING_LEG.labels(leg=leg).inc()
