"""A tiny OTLP/HTTP trace receiver on loopback: `POST /v1/traces` with a protobuf
ExportTraceServiceRequest (opentelemetry-proto), decoded into plain spans and kept in memory.

What the service's exporter sends to a collector, received as a collector would (the tracing
bench sinks its spans here; the tests read them back). Not a collector: no gRPC, no JSON
bodies, no retention beyond the process.
"""

from __future__ import annotations

import gzip
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from bench.ports import free_port

# opentelemetry.proto.trace.v1.Span.SpanKind
KINDS = {0: "UNSPECIFIED", 1: "INTERNAL", 2: "SERVER", 3: "CLIENT", 4: "PRODUCER", 5: "CONSUMER"}


@dataclass(frozen=True)
class ReceivedSpan:
    service: str
    name: str
    kind: str
    trace_id: str
    span_id: str
    parent_span_id: str  # "" for a trace's root
    attributes: dict[str, Any]
    links: tuple[tuple[str, str], ...]  # (trace id, span id) of each linked span
    status_code: int  # 0 unset, 1 ok, 2 error
    duration_ms: float


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in value.kvlist_value.values}
    return getattr(value, kind) if kind else None


def decode(body: bytes) -> list[ReceivedSpan]:
    """The spans of one ExportTraceServiceRequest."""
    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    spans = []
    for resource_spans in request.resource_spans:
        resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                spans.append(
                    ReceivedSpan(
                        service=str(resource.get("service.name", "")),
                        name=span.name,
                        kind=KINDS.get(span.kind, str(span.kind)),
                        trace_id=span.trace_id.hex(),
                        span_id=span.span_id.hex(),
                        parent_span_id=span.parent_span_id.hex(),
                        attributes={a.key: _value(a.value) for a in span.attributes},
                        links=tuple(
                            (link.trace_id.hex(), link.span_id.hex()) for link in span.links
                        ),
                        status_code=span.status.code,
                        duration_ms=(span.end_time_unix_nano - span.start_time_unix_nano) / 1e6,
                    )
                )
    return spans


def count_spans(body: bytes) -> int:
    """How many spans one ExportTraceServiceRequest holds."""
    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    return sum(len(scope.spans) for rs in request.resource_spans for scope in rs.scope_spans)


class OtlpReceiver:
    """`POST /v1/traces` on 127.0.0.1 (a free port); `url` is what OTEL_EXPORTER_OTLP_ENDPOINT
    takes (the exporter appends /v1/traces). `keep=False` only counts the spans (a bench)."""

    def __init__(self, keep: bool = True) -> None:
        self.spans: list[ReceivedSpan] = []
        self.received = 0  # spans, kept or not
        self.requests = 0
        self._keep = keep
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                if self.headers.get("content-encoding") == "gzip":
                    body = gzip.decompress(body)
                if self.path != "/v1/traces" or "protobuf" not in (
                    self.headers.get("content-type") or ""
                ):
                    self.send_response(415 if self.path == "/v1/traces" else 404)
                    self.send_header("content-length", "0")
                    self.end_headers()
                    return
                # A bench only counts (parsing is protobuf's C code): the Python that turns
                # each span into a ReceivedSpan would take the bench's own CPU and GIL.
                spans = decode(body) if receiver._keep else []
                count = len(spans) if receiver._keep else count_spans(body)
                with receiver._lock:
                    receiver.requests += 1
                    receiver.received += count
                    receiver.spans.extend(spans)
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def snapshot(self) -> list[ReceivedSpan]:
        with self._lock:
            return list(self.spans)

    def wait_for(
        self, found: Callable[[list[ReceivedSpan]], bool], timeout: float = 30.0
    ) -> list[ReceivedSpan]:
        """The spans received, once `found` says they hold what is awaited (blocking: run it
        in a thread from async code)."""
        deadline = time.monotonic() + timeout
        while True:
            spans = self.snapshot()
            if found(spans):
                return spans
            if time.monotonic() > deadline:
                names = sorted({f"{s.service}:{s.name}" for s in spans})
                raise AssertionError(f"spans not received within {timeout}s; have {names}")
            time.sleep(0.1)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
