"""A CLIENT span per SQL statement, below whatever recorded span runs it (a request, a stage,
a unit of work): SQLAlchemy's engine events, as the OpenTelemetry SQLAlchemy instrumentation
listens to them, with less work per statement.

That instrumentation, measured on a search (docs/observability/tracing.md, "What it costs"),
parsed the engine's URL again for every statement, built its attributes one `set_attribute`
at a time, and did all of it for statements outside any trace too (the background loops'
polls, which the sampler then drops). Here the attributes every statement shares are computed
once per engine; a statement outside a recorded span costs one check and makes nothing. The
span is the one that instrumentation makes: named by the statement's first word, with
`db.system`, `db.name`, `db.user`, `net.peer.name`, `net.peer.port` and `db.statement` (the
statement with its `$1` placeholders, never the values). A failed statement's span is marked
with the error's type only: Postgres' message may quote a value.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode, Tracer
from sqlalchemy import event
from sqlalchemy.engine import Engine

_SPAN = "_cognis_statement_span"


class StatementSpans:
    """The listeners on one engine (sync engine of an AsyncEngine) while tracing is on."""

    def __init__(self, tracer: Tracer, engine: Engine) -> None:
        self._tracer = tracer
        self._engine = engine
        url = engine.url
        shared: dict[str, Any] = {"db.system": engine.dialect.name}
        for key, value in (
            ("db.name", url.database),
            ("db.user", url.username),
            ("net.peer.name", url.host),
            ("net.peer.port", url.port),
        ):
            if value is not None:
                shared[key] = value
        self._shared = shared
        self._listeners: list[tuple[str, Callable[..., Any]]] = [
            ("before_cursor_execute", self._before),
            ("after_cursor_execute", self._after),
            ("handle_error", self._failed),
        ]
        for name, listener in self._listeners:
            event.listen(engine, name, listener)

    def remove(self) -> None:
        for name, listener in self._listeners:
            event.remove(self._engine, name, listener)

    def _before(
        self, conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, many: bool
    ) -> None:
        if context is None or not trace.get_current_span().is_recording():
            return  # outside any recorded span: a poll, or a request the sampler left out
        attributes = dict(self._shared)
        attributes["db.statement"] = statement
        span = self._tracer.start_span(
            _operation(statement), kind=SpanKind.CLIENT, attributes=attributes
        )
        setattr(context, _SPAN, span)

    def _after(
        self, conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, many: bool
    ) -> None:
        span = getattr(context, _SPAN, None)
        if span is not None:
            span.end()
            setattr(context, _SPAN, None)

    def _failed(self, exception_context: Any) -> None:
        context = exception_context.execution_context
        span = getattr(context, _SPAN, None) if context is not None else None
        if span is None:
            return
        error = exception_context.original_exception
        span.set_status(Status(StatusCode.ERROR, type(error).__name__))
        span.set_attribute("error.type", type(error).__qualname__)
        span.end()
        setattr(context, _SPAN, None)


def _operation(statement: str) -> str:
    """The statement's first word (`SELECT`, `INSERT`, `WITH`, ...)."""
    head = statement.lstrip()[:16].split(None, 1)
    return head[0].upper() if head else "SQL"
