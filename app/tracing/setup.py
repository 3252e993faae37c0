"""Starting traces in a process: the SDK, its exporter and the instrumentations, as the standard
OTEL_* variables ask; nothing at all (no SDK imported, no instrumentation) when they do not.

Traces are on when `OTEL_TRACES_EXPORTER` names `otlp` or `console`, or, with that variable
unset, when `OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is set;
`OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none` keeps them off. The OTLP exporter is
OTLP/HTTP with protobuf bodies and reads its own variables (endpoint, headers, timeout,
compression); `OTEL_SERVICE_NAME` and `OTEL_RESOURCE_ATTRIBUTES` name the process (default
`cognis-<process>`: cognis-api, cognis-worker, cognis-relay, cognis-model, ...);
`OTEL_BSP_*` tune the batch processor, `OTEL_TRACES_SAMPLER` (+ `_ARG`) the sampling of new
traces, `OTEL_PYTHON_DISABLED_INSTRUMENTATIONS` leaves out client spans by name (`sqlalchemy`,
`httpx`, `opensearch`; `aiohttp-client`, the name of OpenSearch's before, still works).

A trace starts at a request or at a unit of work (an ingestion claim), never at a lone client
call: the background loops poll Postgres, OpenSearch and the model service all day, and those
polls make no traces (the client spans are made below a recorded span only). Below a traced
span everything is recorded: each SQL statement (SQLAlchemy's engine events,
app/tracing/statements.py; statements carry bind placeholders, never values), each OpenSearch
request (the async client's transport; its path without the query string), each request to
the model service and the LLM (httpx's transport, which carries the W3C `traceparent` header
there; app/tracing/clients.py).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import structlog

from app import tracing
from app.config import ApiSettings

if TYPE_CHECKING:
    import httpx
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter
    from sqlalchemy.ext.asyncio import AsyncEngine

    from app.tracing.statements import StatementSpans

log = structlog.get_logger(__name__)

EXPORTERS = ("otlp", "console")
PROTOCOL = "http/protobuf"
TRUE = ("true", "1", "yes", "on")

_provider: TracerProvider | None = None
# OTEL_PYTHON_DISABLED_INSTRUMENTATIONS, as this process read it at start: the client spans
# (sqlalchemy, httpx, opensearch or aiohttp-client) not to make.
_disabled: frozenset[str] = frozenset()
# The SQL statement listeners of each engine traced (removed when tracing stops).
_statement_spans: list[StatementSpans] = []


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
    api: ApiSettings,
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
    tracing.activate(provider.get_tracer(tracing.SCOPE), api.trace_content)
    log.info(
        "tracing.started",
        process=process,
        service=resource.attributes.get("service.name"),
        exporters=list(exporters) or ["given"],
        content=api.trace_content,
    )
    return True


def stop_tracing() -> None:
    """Flush and end this process's tracing (tests; a process flushes at exit by itself)."""
    global _provider, _disabled
    if _provider is None:
        return
    tracing.deactivate()
    while _statement_spans:
        _statement_spans.pop().remove()
    _provider.shutdown()
    _provider = None
    _disabled = frozenset()


def tracer_provider() -> TracerProvider | None:
    """The process's provider while tracing is on."""
    return _provider


def trace_engine(engine: AsyncEngine) -> None:
    """Spans for the engine's SQL statements, under whatever span runs them (no-op while off;
    app/tracing/statements.py)."""
    if _provider is None or "sqlalchemy" in _disabled:
        return
    from app.tracing.statements import StatementSpans

    _statement_spans.append(
        StatementSpans(_provider.get_tracer(tracing.SCOPE + ".sql"), engine.sync_engine)
    )


def trace_http_client(client: httpx.Client | httpx.AsyncClient) -> None:
    """Spans for the client's requests below a recorded span, named `<METHOD> <path>`, with the
    W3C trace context in their headers (no-op while off; app/tracing/clients.py): the model
    service and the LLM continue the trace."""
    if _provider is None or "httpx" in _disabled:
        return
    from app.tracing.clients import trace_transport

    trace_transport(client, _provider.get_tracer(tracing.SCOPE + ".http"))


def opensearch_transport_class() -> type | None:
    """The transport class of the service's OpenSearch client: one that makes a span per
    request below a recorded span (`opensearch _search`, ...) while tracing, else None (the
    client's default)."""
    if _provider is None or {"opensearch", "aiohttp-client"} & _disabled:
        return None
    from app.tracing.clients import opensearch_transport

    return opensearch_transport(_provider.get_tracer(tracing.SCOPE + ".opensearch"))


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
