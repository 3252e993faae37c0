"""CLIENT spans of the service's HTTP calls: to the model service and the LLM (httpx), and to
OpenSearch (opensearch-py's async transport), made below a recorded span only.

One span per call, made by a thin wrapper around the client's transport: `<METHOD> <path>`
for httpx, with the W3C `traceparent` header sent along (the model service's request span
continues the trace); `opensearch <operation>` for OpenSearch (`_search`, `_bulk`, ...: the
path's last `_` part), its request body's encoding and its answer's decoding included. The
attributes are the HTTP client conventions' (`http.request.method`, `url.full` without its
query string, `server.address`, `server.port`, `http.response.status_code`, `error.type`).

These replace the OpenTelemetry httpx and aiohttp instrumentations, which cost several
hundred microseconds of CPU a call here (docs/observability/tracing.md, "What it costs"): they
build their attributes and metrics' attributes for every request, traced or not, and aiohttp's
trace hooks run for every request of every session of the process.
"""

from __future__ import annotations

from typing import Any

import httpx
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode, Tracer
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

_W3C = TraceContextTextMapPropagator()


def _url_attributes(scheme: str, host: str | None, port: int | None, path: str) -> dict[str, Any]:
    netloc = f"{host}:{port}" if port else str(host)
    attributes: dict[str, Any] = {"url.full": f"{scheme}://{netloc}{path}"}
    if host:
        attributes["server.address"] = host
    if port:
        attributes["server.port"] = port
    return attributes


def _answered(span: Any, status: int) -> None:
    span.set_attribute("http.response.status_code", status)
    if status >= 400:
        span.set_status(Status(StatusCode.ERROR))
        span.set_attribute("error.type", str(status))


def _failed(span: Any, exc: BaseException) -> None:
    span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
    span.set_attribute("error.type", type(exc).__qualname__)


class _TracedCall:
    """The span of one call, current while it runs (so that the propagated context is its)."""

    __slots__ = ("_scope", "span")

    def __init__(self, tracer: Tracer, name: str, attributes: dict[str, Any]) -> None:
        self.span = tracer.start_span(name, kind=SpanKind.CLIENT, attributes=attributes)
        self._scope = trace.use_span(self.span, end_on_exit=True)

    def __enter__(self) -> Any:
        return self._scope.__enter__()

    def __exit__(self, kind: Any, exc: BaseException | None, traceback: Any) -> None:
        if exc is not None:
            _failed(self.span, exc)
        self._scope.__exit__(None, None, None)


def _httpx_call(tracer: Tracer, request: httpx.Request) -> _TracedCall:
    url = request.url
    attributes = _url_attributes(url.scheme, url.host, url.port, url.path)
    attributes["http.request.method"] = request.method
    return _TracedCall(tracer, f"{request.method} {url.path}", attributes)


class TracedTransport(httpx.BaseTransport):
    """A blocking httpx transport with a span per request below a recorded span."""

    def __init__(self, inner: httpx.BaseTransport, tracer: Tracer) -> None:
        self._inner = inner
        self._tracer = tracer

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if not trace.get_current_span().is_recording():
            return self._inner.handle_request(request)
        with _httpx_call(self._tracer, request) as span:
            _W3C.inject(request.headers)
            response = self._inner.handle_request(request)
            _answered(span, response.status_code)
            return response

    def close(self) -> None:
        self._inner.close()


class AsyncTracedTransport(httpx.AsyncBaseTransport):
    """An async httpx transport with a span per request below a recorded span."""

    def __init__(self, inner: httpx.AsyncBaseTransport, tracer: Tracer) -> None:
        self._inner = inner
        self._tracer = tracer

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if not trace.get_current_span().is_recording():
            return await self._inner.handle_async_request(request)
        with _httpx_call(self._tracer, request) as span:
            _W3C.inject(request.headers)
            response = await self._inner.handle_async_request(request)
            _answered(span, response.status_code)
            return response

    async def aclose(self) -> None:
        await self._inner.aclose()


def trace_transport(client: httpx.Client | httpx.AsyncClient, tracer: Tracer) -> None:
    """Wrap the client's transport (its default one: the client keeps no public setter)."""
    if isinstance(client, httpx.AsyncClient):
        inner: Any = client._transport
        client._transport = AsyncTracedTransport(inner, tracer)
    else:
        client._transport = TracedTransport(client._transport, tracer)


def opensearch_transport(tracer: Tracer) -> type:
    """opensearch-py's AsyncTransport with a span per request below a recorded span (the
    `transport_class` of the service's AsyncOpenSearch client while tracing)."""
    from opensearchpy import AsyncTransport
    from opensearchpy.exceptions import TransportError

    class TracedOpenSearchTransport(AsyncTransport):  # type: ignore[misc]
        async def perform_request(self, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
            if not trace.get_current_span().is_recording():
                return await super().perform_request(method, url, *args, **kwargs)
            path = url.split("?", 1)[0]
            operation = next(
                (part for part in reversed(path.split("/")) if part.startswith("_")), method
            )
            attributes = {
                "db.system.name": "opensearch",
                "db.operation.name": operation,
                "http.request.method": method,
                "url.path": path,
            }
            with _TracedCall(tracer, f"opensearch {operation}", attributes) as span:
                try:
                    return await super().perform_request(method, url, *args, **kwargs)
                except TransportError as exc:
                    if isinstance(exc.status_code, int):
                        span.set_attribute("http.response.status_code", exc.status_code)
                    raise

    return TracedOpenSearchTransport
