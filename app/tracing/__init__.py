"""Traces (OpenTelemetry): the spans this service makes itself and the trace context it carries
from one process to the next (the model service, the ingestion workers).

Off unless the standard OTEL_* variables ask for traces (app/tracing/setup.py reads them and
starts the SDK in each process). While off, no SDK is set up and every helper here is a no-op
that makes nothing: `span` hands back one shared null context, `traceparent` says None. The
only cost a request pays is a test of one module global per helper.

What a span carries: names of stages and steps, ids, counts, work classes. Never memory
content (a query, a message, a memory's text, a filter's values) unless the operator opts in
with COGNIS_TRACE_CONTENT: only `content` writes such a value, and only then.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode, Tracer
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

# The instrumentation scope of the service's own spans.
SCOPE = "cognis"
# W3C trace context, the one format stored with queued work (ingest_tasks.traceparent).
_W3C = TraceContextTextMapPropagator()
_OFF: AbstractContextManager[None] = nullcontext()
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Active:
    """The process's tracing while it is on."""

    tracer: Tracer
    # COGNIS_TRACE_CONTENT: spans may carry memory content (`content`).
    content: bool


_active: Active | None = None


def activate(tracer: Tracer, content: bool) -> None:
    """Turn the helpers on (app/tracing/setup.py, once the SDK is set up)."""
    global _active
    _active = Active(tracer, content)


def deactivate() -> None:
    global _active
    _active = None


def enabled() -> bool:
    return _active is not None


def records_content() -> bool:
    """Whether spans may carry memory content (COGNIS_TRACE_CONTENT, tracing on)."""
    return _active is not None and _active.content


def span(
    name: str,
    attributes: Mapping[str, Any] | None = None,
    *,
    kind: SpanKind = SpanKind.INTERNAL,
    parent: Context | None = None,
    links: Sequence[Link] = (),
) -> AbstractContextManager[Span | None]:
    """A span around the block, current inside it (a child of the current span, or of `parent`
    when given); None, and nothing made, while tracing is off. An exception leaving the block
    marks the span failed with its type only: an error's message may quote what a user sent."""
    if _active is None:
        return _OFF
    if parent is None:
        # Below a span the sampler dropped (a request outside OTEL_TRACES_SAMPLER_ARG's share)
        # nothing would be recorded: make nothing.
        here = trace.get_current_span().get_span_context()
        if here.is_valid and not here.trace_flags.sampled:
            return _OFF
    return _Recording(_active.tracer.start_span(name, parent, kind, attributes, links))


def span_until_done(name: str, start: Callable[[], asyncio.Future[T]]) -> asyncio.Future[T]:
    """`start()`'s work begun inside a span that ends when its future does: for work started
    now and awaited later (a search's early query embedding), whose own spans are then the
    span's children however long they run. No span while tracing is off or unsampled."""
    if _active is None:
        return start()
    here = trace.get_current_span().get_span_context()
    if here.is_valid and not here.trace_flags.sampled:
        return start()
    started = _active.tracer.start_span(name)
    token = otel_context.attach(trace.set_span_in_context(started))
    try:
        future = start()
    finally:
        otel_context.detach(token)
    future.add_done_callback(lambda _: started.end())
    return future


class _Recording(AbstractContextManager[Span]):
    """A started span, current while the block runs and ended after it (what the SDK's
    `start_as_current_span` does, in one plain object rather than two generators)."""

    __slots__ = ("_span", "_token")

    def __init__(self, started: Span) -> None:
        self._span = started
        self._token: object = None

    def __enter__(self) -> Span:
        self._token = otel_context.attach(trace.set_span_in_context(self._span))
        return self._span

    def __exit__(self, kind: Any, exc: BaseException | None, traceback: Any) -> None:
        if exc is not None and not isinstance(exc, GeneratorExit):
            failed(self._span, exc)
        self._span.end()
        otel_context.detach(self._token)  # type: ignore[arg-type]


def failed(current: Span, exc: BaseException) -> None:
    """Mark `current` failed by `exc`'s type (semantic conventions' `error.type`)."""
    current.set_status(Status(StatusCode.ERROR, type(exc).__name__))
    current.set_attribute("error.type", type(exc).__qualname__)


def annotate(attributes: Mapping[str, Any]) -> None:
    """Attributes on the current span (none while off)."""
    if _active is not None:
        trace.get_current_span().set_attributes(attributes)


def content(key: str, value: str) -> None:
    """A memory-content attribute on the current span: only with COGNIS_TRACE_CONTENT."""
    if _active is not None and _active.content:
        trace.get_current_span().set_attribute(key, value)


def add_trace_ids(_: Any, __: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """A structlog processor: the current trace and span ids on each log line while tracing
    (the line is left as it is while off)."""
    if _active is not None:
        context = trace.get_current_span().get_span_context()
        if context.is_valid:
            event["trace_id"] = format(context.trace_id, "032x")
            event["span_id"] = format(context.span_id, "016x")
    return event


def traceparent() -> str | None:
    """The current span's W3C `traceparent`, to store with queued work (None while off, or
    outside any span)."""
    if _active is None:
        return None
    carrier: dict[str, str] = {}
    _W3C.inject(carrier)
    return carrier.get("traceparent")


def continued(parent: str | None) -> Context | None:
    """The context a stored `traceparent` names: where a queued task's spans continue its
    trace; None when there is none (or it does not parse)."""
    if _active is None or not parent:
        return None
    extracted = _W3C.extract({"traceparent": parent})
    return extracted if trace.get_current_span(extracted).get_span_context().is_valid else None


def link_to(parent: Context | None) -> list[Link]:
    """A link to the span `parent` names (none for None)."""
    if parent is None:
        return []
    return [Link(trace.get_current_span(parent).get_span_context())]


def queued_work_span(
    name: str, attributes: Mapping[str, Any], traceparents: Sequence[str | None]
) -> AbstractContextManager[Span | None]:
    """A span for work taken from a queue, queued by the requests `traceparents` name: one
    traced request's work continues its trace; work of several starts a trace of its own,
    linked to each of theirs."""
    if _active is None:
        return _OFF
    parents = [context for p in traceparents if (context := continued(p)) is not None]
    if len(traceparents) == 1 and parents:
        return span(name, attributes, parent=parents[0])
    return span(
        name, attributes, parent=Context(), links=[link for p in parents for link in link_to(p)]
    )


def queued_item_span(
    name: str, attributes: Mapping[str, Any], traceparent: str | None
) -> AbstractContextManager[Span | None]:
    """A span for one item of that work (inside `queued_work_span`'s): in the trace of the
    request that queued it, linked to the work's span; simply below the work's span when
    that continues the same trace already, or when the item came untraced."""
    if _active is None:
        return _OFF
    parent = continued(traceparent)
    here = trace.get_current_span().get_span_context()
    if parent is None or trace.get_current_span(parent).get_span_context().trace_id == (
        here.trace_id
    ):
        return span(name, attributes)
    return span(name, attributes, parent=parent, links=[Link(here)] if here.is_valid else [])


def in_this_context(function: Callable[..., T]) -> Callable[..., T]:
    """`function`, run in a copy of the caller's context wherever it is called (a thread
    pool's worker does not inherit it): its spans and the headers it sends continue the
    caller's trace. `function` itself while off."""
    if _active is None:
        return function
    # A fresh copy per call: one context cannot be entered by two threads at once.
    snapshot = contextvars.copy_context()

    def run(*args: Any, **kwargs: Any) -> T:
        return snapshot.run(function, *args, **kwargs)

    return run
