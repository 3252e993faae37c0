"""Request spans for a Litestar app (the API, the model service): Litestar's OpenTelemetry plugin
configured for this service, or nothing at all while tracing is off.

A request's span continues the caller's trace (its `traceparent` header), is named
`<METHOD> <route template>` once the router has matched the route (`POST
/v1/users/{user_id}/search`: one name per route, whatever the ids), and carries no query
string unless COGNIS_TRACE_CONTENT (a filter's values are user content). The ASGI receive and
send spans are left out: two spans per request that only say a body was read and written.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from opentelemetry import trace

from app import tracing
from app.tracing.setup import tracer_provider

REDACTED = "[redacted]"
# Attributes of the ASGI instrumentation that may hold a query string (either semconv).
_URL_ATTRIBUTES = ("http.target", "http.url", "url.full")


def request_tracing(excluded_paths: Sequence[str] = ()) -> list[Any]:
    """The plugins that trace every request but `excluded_paths` (probes, metrics): Litestar's
    OpenTelemetry plugin, or none while tracing is off."""
    provider = tracer_provider()
    if provider is None:
        return []
    from litestar.plugins.opentelemetry import OpenTelemetryConfig, OpenTelemetryPlugin
    from opentelemetry.metrics import NoOpMeterProvider

    config = OpenTelemetryConfig(
        tracer_provider=provider,
        # Request metrics are Prometheus' (app/asgi.py); the spans are what is wanted here.
        meter_provider=NoOpMeterProvider(),
        exclude=[f"^{path}$" for path in excluded_paths],
        exclude_spans=["receive", "send"],
        scope_span_details_extractor=_by_method,
        server_request_hook_handler=None if tracing.records_content() else _without_query,
    )
    return [OpenTelemetryPlugin(config)]


def route_naming() -> list[Any]:
    """The middleware that names a request's span by its route (none while off)."""
    return [_name_by_route] if tracing.enabled() else []


def _by_method(scope: Any) -> tuple[str, dict[str, Any]]:
    # Before routing only the method is known; the path holds ids (user, memory).
    return str(scope.get("method") or scope.get("type", "request")), {}


def _name_by_route(app: Any) -> Any:
    async def named(scope: Any, receive: Any, send: Any) -> None:
        route = scope.get("path_template")
        if route and scope.get("type") == "http":
            current = trace.get_current_span()
            current.update_name(f"{scope.get('method')} {route}")
            current.set_attribute("http.route", route)
        await app(scope, receive, send)

    return named


def _without_query(span: Any, scope: Any) -> None:
    """The request's URL attributes without their query string."""
    if not scope.get("query_string") or not span.is_recording():
        return
    attributes = getattr(span, "attributes", None) or {}
    for key in _URL_ATTRIBUTES:
        value = attributes.get(key)
        if isinstance(value, str) and "?" in value:
            span.set_attribute(key, value.split("?", 1)[0] + "?" + REDACTED)
    if "url.query" in attributes:
        span.set_attribute("url.query", REDACTED)
