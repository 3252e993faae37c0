"""Starting traces in a process: the SDK, its exporter and the instrumentations, as the standard
OTEL_* variables ask; nothing at all (no SDK imported, no instrumentation) when they do not.

Traces are on when `OTEL_TRACES_EXPORTER` names `otlp` or `console`, or, with that variable
unset, when `OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is set;
`OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none` keeps them off. The OTLP exporter is
OTLP/HTTP with protobuf bodies and reads its own variables (endpoint, headers, timeout,
compression); `OTEL_SERVICE_NAME` and `OTEL_RESOURCE_ATTRIBUTES` name the process (default
`cognis-<process>`: cognis-api, cognis-worker, cognis-relay, cognis-model, ...);
`OTEL_BSP_*` tune the batch processor, `OTEL_TRACES_SAMPLER` (+ `_ARG`) the sampling of new
traces, `OTEL_PYTHON_DISABLED_INSTRUMENTATIONS` leaves out instrumentations by name
(`sqlalchemy`, `httpx`, `aiohttp-client`).

A trace starts at a request or at a unit of work (an ingestion claim), never at a lone client
call: the background loops poll Postgres, OpenSearch and the model service all day, and those
polls make no traces (the sampler drops a root CLIENT span). Below a traced span everything
is recorded: each SQL statement (SQLAlchemy's engine events; statements carry bind
placeholders, never values), each OpenSearch request (aiohttp, the async client's transport;
its URL without the query string), each request to the model service and the LLM (httpx,
which carries the W3C `traceparent` header there).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import structlog

from app import tracing
from app.config import Settings

if TYPE_CHECKING:
    import httpx
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter
    from sqlalchemy.ext.asyncio import AsyncEngine

log = structlog.get_logger(__name__)

EXPORTERS = ("otlp", "console")
PROTOCOL = "http/protobuf"
TRUE = ("true", "1", "yes", "on")

_provider: TracerProvider | None = None
# OTEL_PYTHON_DISABLED_INSTRUMENTATIONS, as this process read it at start: the names of
# instrumentations (sqlalchemy, httpx, aiohttp-client) not to install.
_disabled: frozenset[str] = frozenset()


def disabled_instrumentations(environ: Mapping[str, str]) -> frozenset[str]:
    named = environ.get("OTEL_PYTHON_DISABLED_INSTRUMENTATIONS", "")
    return frozenset(n.strip().lower() for n in named.split(",") if n.strip())


def requested_exporters(environ: Mapping[str, str]) -> tuple[str, ...]:
    """The exporters the OTEL_* variables ask for; () when traces are off. ValueError for a
    value this service cannot honour (an unknown exporter, an OTLP protocol but http/protobuf)."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() in TRUE:
        return ()
    named = tuple(
        e.strip().lower() for e in environ.get("OTEL_TRACES_EXPORTER", "").split(",") if e.strip()
    )
    if not named:
        endpoint = environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or environ.get(
            "OTEL_EXPORTER_OTLP_ENDPOINT"
        )
        named = ("otlp",) if endpoint else ()
    if "none" in named:
        return ()
    unknown = [e for e in named if e not in EXPORTERS]
    if unknown:
        raise ValueError(
            f"OTEL_TRACES_EXPORTER={','.join(unknown)} is not supported here; use one of "
            f"{', '.join(EXPORTERS)} or none"
        )
    protocol = (
        environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        or environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or PROTOCOL
    ).strip()
    if "otlp" in named and protocol != PROTOCOL:
        raise ValueError(
            f"OTLP protocol {protocol!r} is not supported here: traces go out as {PROTOCOL} "
            "(OTLP/HTTP, port 4318 on a collector)"
        )
    return named


def start_tracing(
    settings: Settings,
    process: str,
    *,
    environ: Mapping[str, str] | None = None,
    exporter: SpanExporter | None = None,
) -> bool:
    """Start this process's tracing if the environment asks for it (or `exporter` is given:
    tests, which then get each span as it ends); True when tracing is on. Once per process:
    a later call (the API's runtime after a test started it) leaves it as it is."""
    global _provider, _disabled
    if tracing.enabled():
        return True
    environ = os.environ if environ is None else environ
    exporters = () if exporter is not None else requested_exporters(environ)
    if exporter is None and not exporters:
        return False

    from opentelemetry import trace
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

    resource = Resource.create(
        {
            "service.name": environ.get("OTEL_SERVICE_NAME") or f"cognis-{process}",
            "service.namespace": "cognis",
            "cognis.process": process,
        }
    )
    provider = TracerProvider(resource=resource, sampler=_sampler(environ))
    if exporter is not None:
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    for name in exporters:
        provider.add_span_processor(BatchSpanProcessor(_exporter(name, environ)))
    if exporters:
        # The process's global provider too (not for a test's exporter: a process has one,
        # and a test starts and stops tracing more than once).
        trace.set_tracer_provider(provider)
    _provider = provider
    _disabled = disabled_instrumentations(environ)
    tracing.activate(provider.get_tracer(tracing.SCOPE), settings.trace_content)
    if "aiohttp-client" not in _disabled:
        _trace_opensearch(provider)
    log.info(
        "tracing.started",
        process=process,
        service=resource.attributes.get("service.name"),
        exporters=list(exporters) or ["given"],
        content=settings.trace_content,
    )
    return True


def stop_tracing() -> None:
    """Flush and end this process's tracing (tests; a process flushes at exit by itself)."""
    global _provider, _disabled
    if _provider is None:
        return
    from opentelemetry.instrumentation.aiohttp_client import AioHttpClientInstrumentor
    from opentelemetry.instrumentation.sqlalchemy.engine import EngineTracer

    tracing.deactivate()
    AioHttpClientInstrumentor().uninstrument()
    EngineTracer.remove_all_event_listeners()
    _provider.shutdown()
    _provider = None
    _disabled = frozenset()


def tracer_provider() -> TracerProvider | None:
    """The process's provider while tracing is on."""
    return _provider


def trace_engine(engine: AsyncEngine) -> None:
    """Spans for the engine's SQL statements, under whatever span runs them (no-op while off)."""
    if _provider is None or "sqlalchemy" in _disabled:
        return
    from opentelemetry.instrumentation.sqlalchemy.engine import EngineTracer
    from opentelemetry.metrics import NoOpMeterProvider

    meter = NoOpMeterProvider().get_meter(tracing.SCOPE)
    EngineTracer(
        _provider.get_tracer("opentelemetry.instrumentation.sqlalchemy"),
        engine.sync_engine,
        meter.create_up_down_counter("db.client.connections.usage"),
    )


def trace_http_client(client: httpx.Client | httpx.AsyncClient) -> None:
    """Spans for the client's requests, named `<METHOD> <path>`, with the W3C trace context in
    their headers (no-op while off): the model service and the LLM continue the trace."""
    if _provider is None or "httpx" in _disabled:
        return
    from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
    from opentelemetry.metrics import NoOpMeterProvider

    HTTPXClientInstrumentor.instrument_client(
        client,
        tracer_provider=_provider,
        meter_provider=NoOpMeterProvider(),
        request_hook=_name_http_span,
    )


def _name_http_span(span: Any, request: Any) -> None:
    method = request.method.decode() if isinstance(request.method, bytes) else request.method
    span.update_name(f"{method} {request.url.path}")


def _trace_opensearch(provider: TracerProvider) -> None:
    """The async OpenSearch client talks aiohttp (the only aiohttp user in this service):
    every session made from now on is traced, its URLs without their query string."""
    from opentelemetry.instrumentation.aiohttp_client import AioHttpClientInstrumentor
    from opentelemetry.metrics import NoOpMeterProvider

    AioHttpClientInstrumentor().instrument(
        tracer_provider=provider,
        meter_provider=NoOpMeterProvider(),
        url_filter=_without_query,
        request_hook=_name_opensearch_span,
    )


def _without_query(url: Any) -> str:
    return str(url.with_query(None))


def _name_opensearch_span(span: Any, params: Any) -> None:
    """`opensearch <operation>` (`_search`, `_bulk`, `_count`, ...: the path's last `_`
    part, or the method): a name per kind of call, not per document."""
    if not span.is_recording():
        return
    operation = next(
        (part for part in reversed(params.url.path.split("/")) if part.startswith("_")),
        params.method,
    )
    span.update_name(f"opensearch {operation}")
    span.set_attribute("db.system.name", "opensearch")
    span.set_attribute("db.operation.name", operation)


def _exporter(name: str, environ: Mapping[str, str]) -> SpanExporter:
    if name == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    # The endpoint as `requested_exporters` read it (an empty variable, as compose passes one
    # it was not given, is unset); headers, timeout, compression: its own OTEL_* variables.
    endpoint = environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or None
    if endpoint is None and (base := environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")):
        endpoint = base.rstrip("/") + "/v1/traces"
    return OTLPSpanExporter(endpoint=endpoint)


def _sampler(environ: Mapping[str, str]) -> Any:
    from opentelemetry.sdk.trace.sampling import (
        ALWAYS_OFF,
        ALWAYS_ON,
        Decision,
        ParentBased,
        Sampler,
        SamplingResult,
        TraceIdRatioBased,
    )
    from opentelemetry.trace import SpanKind

    name = environ.get("OTEL_TRACES_SAMPLER", "").strip().lower().removeprefix("parentbased_")
    if name in ("", "always_on"):
        roots: Sampler = ALWAYS_ON
    elif name == "always_off":
        roots = ALWAYS_OFF
    elif name == "traceidratio":
        roots = TraceIdRatioBased(float(environ.get("OTEL_TRACES_SAMPLER_ARG") or 1.0))
    else:
        raise ValueError(
            f"OTEL_TRACES_SAMPLER={name!r} is not supported here: use always_on, always_off or "
            "traceidratio (each parent-based)"
        )

    class OperationsOnly(Sampler):
        """New traces start at requests and units of work, never at a lone client call."""

        def should_sample(
            self,
            parent_context: Any,
            trace_id: int,
            name: str,
            kind: SpanKind | None = None,
            attributes: Any = None,
            links: Any = None,
            trace_state: Any = None,
        ) -> SamplingResult:
            if kind is SpanKind.CLIENT:
                return SamplingResult(Decision.DROP)
            return roots.should_sample(
                parent_context, trace_id, name, kind, attributes, links, trace_state
            )

        def get_description(self) -> str:
            return f"OperationsOnly{{{roots.get_description()}}}"

    return ParentBased(root=OperationsOnly())
