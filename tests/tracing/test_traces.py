"""Traces of the real API (issue 44): a search's request span with a span per retrieval stage,
its SQL statements, OpenSearch calls and the model service's call below them, and an
ingestion task continuing the trace of the request that queued it; captured by an in-process
exporter in an API in this process, and by an OTLP receiver on loopback from a real
`python -m app serve` and model service started with OTEL_* variables. No memory content in
any span unless COGNIS_TRACE_CONTENT; nothing set up at all while the variables are unset.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterable, Iterator
from dataclasses import dataclass
from typing import Any
from unittest import mock

import httpx
import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from sqlalchemy import text as sa_text
from sqlalchemy.exc import DBAPIError

from app import tracing
from app.asgi import create_app
from app.config import Settings
from app.tracing.setup import requested_exporters, start_tracing, stop_tracing
from bench.otlp_receiver import OtlpReceiver, ReceivedSpan
from tests import services
from tests.conftest import (
    API_KEY,
    ROOT,
    ApiProcess,
    ServiceProcess,
    lifespan_running,
    wait_until,
)

# One worker runs them all: the traced API in this process and the traced processes are each
# started once.
pytestmark = pytest.mark.xdist_group("tracing")

SEARCH_ROUTE = "POST /v1/users/{user_id}/search"
MESSAGES_ROUTE = "POST /v1/users/{user_id}/messages"
BATCH_ROUTE = "POST /v1/users/{user_id}/memories/batch"


@dataclass(frozen=True)
class Span:
    """What the checks read of a span, from the SDK's or from the OTLP receiver's."""

    name: str
    kind: str
    trace_id: str
    span_id: str
    parent_id: str
    attributes: dict[str, Any]
    service: str = ""


def _from_sdk(span: ReadableSpan) -> Span:
    assert span.context is not None
    return Span(
        name=span.name,
        kind=span.kind.name,
        trace_id=format(span.context.trace_id, "032x"),
        span_id=format(span.context.span_id, "016x"),
        parent_id=format(span.parent.span_id, "016x") if span.parent else "",
        attributes=dict(span.attributes or {}),
        service=str(span.resource.attributes.get("service.name", "")),
    )


def _from_otlp(span: ReceivedSpan) -> Span:
    return Span(
        span.name,
        span.kind,
        span.trace_id,
        span.span_id,
        span.parent_span_id,
        span.attributes,
        span.service,
    )


def _root(spans: Iterable[Span], name: str) -> Span:
    found = [s for s in spans if s.name == name and s.kind == "SERVER"]
    assert len(found) == 1, sorted({s.name for s in spans})
    return found[0]


def _request_trace(spans: list[Span], route: str) -> tuple[Span, list[Span], dict[str, Span]]:
    """The request span of `route`, every span of its trace, and those by id."""
    request = _root(spans, route)
    trace = [s for s in spans if s.trace_id == request.trace_id]
    return request, trace, {s.span_id: s for s in trace}


def _ancestors(span: Span, by_id: dict[str, Span]) -> list[str]:
    names = []
    while span.parent_id in by_id:
        span = by_id[span.parent_id]
        names.append(span.name)
    return names


def _values(spans: Iterable[Span]) -> str:
    """Everything a span says, as text: its name and every attribute's value."""
    return "\n".join(f"{s.name} {s.attributes!r}" for s in spans)


def check_search_trace(spans: list[Span], answer: dict[str, Any]) -> list[Span]:
    """The search's trace: its request span, `retrieval.search` below it, a span per stage the
    answer timed, SQL statements, an OpenSearch search and the model service's call."""
    request = _root(spans, SEARCH_ROUTE)
    trace = [s for s in spans if s.trace_id == request.trace_id]
    by_id = {s.span_id: s for s in trace}
    (search,) = [s for s in trace if s.name == "retrieval.search"]
    assert search.parent_id == request.span_id
    assert search.attributes["cognis.retrieval.results"] == len(answer["results"])
    # One mechanism for both: every stage the response timed is a span of that name.
    timed = {f"retrieval.{stage.removesuffix('_ms')}" for stage in answer["stage_durations_ms"]}
    assert {"retrieval.vector_256d", "retrieval.bm25", "retrieval.rrf_fusion"} <= timed
    stages = {s.name for s in trace if s.name in timed}
    assert stages == timed
    for stage in (s for s in trace if s.name in timed):
        assert "retrieval.search" in _ancestors(stage, by_id), stage.name
    statements = [s for s in trace if s.kind == "CLIENT" and "postgresql" in _db_system(s)]
    assert statements, "no SQL statement span"
    assert all(
        "retrieval.search" in _ancestors(s, by_id) or s.parent_id == request.span_id
        for s in statements
    )
    assert any(s.name == "opensearch _search" for s in trace), sorted(s.name for s in trace)
    (model_call,) = [s for s in trace if s.kind == "CLIENT" and s.name == "POST /v1/embeddings"]
    assert "retrieval.query_embedding" in _ancestors(model_call, by_id)
    return trace


def _db_system(span: Span) -> str:
    return str(span.attributes.get("db.system") or span.attributes.get("db.system.name") or "")


def test_off_unless_the_otel_variables_ask() -> None:
    assert requested_exporters({}) == ()
    assert requested_exporters({"OTEL_SERVICE_NAME": "x"}) == ()
    assert requested_exporters({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}) == ("otlp",)
    assert requested_exporters({"OTEL_TRACES_EXPORTER": "console"}) == ("console",)
    disabled = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "true"}
    assert requested_exporters(disabled) == ()
    none = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "none"}
    assert requested_exporters(none) == ()
    with pytest.raises(ValueError, match="grpc"):
        requested_exporters({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"})
    with pytest.raises(ValueError, match="zipkin"):
        requested_exporters({"OTEL_TRACES_EXPORTER": "zipkin"})


def test_new_traces_start_at_operations_never_at_a_lone_client_call() -> None:
    """The background loops' polls (SQL, OpenSearch, the model service's /health) are CLIENT
    spans without a parent: dropped. Requests and units of work start traces; below a
    sampled span every client call is recorded."""
    from opentelemetry.sdk.trace.sampling import Decision
    from opentelemetry.trace import (
        NonRecordingSpan,
        SpanContext,
        SpanKind,
        TraceFlags,
        set_span_in_context,
    )

    from app.tracing.setup import _sampler

    sampler = _sampler({})
    trace_id = 0x5CE0E9A56015FEC5AADFA328AE398115

    def decision(kind: SpanKind, parent: Any = None) -> Decision:
        return sampler.should_sample(parent, trace_id, "x", kind).decision

    assert decision(SpanKind.CLIENT) is Decision.DROP
    assert decision(SpanKind.SERVER) is Decision.RECORD_AND_SAMPLE
    assert decision(SpanKind.INTERNAL) is Decision.RECORD_AND_SAMPLE
    sampled = SpanContext(trace_id, 0xAB, is_remote=False, trace_flags=TraceFlags(1))
    inside = set_span_in_context(NonRecordingSpan(sampled))
    assert decision(SpanKind.CLIENT, inside) is Decision.RECORD_AND_SAMPLE
    none = _sampler(
        {"OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0"}
    )
    assert none.should_sample(None, trace_id, "x", SpanKind.SERVER).decision is Decision.DROP
    with pytest.raises(ValueError, match="jaeger_remote"):
        _sampler({"OTEL_TRACES_SAMPLER": "jaeger_remote"})


def test_free_when_off() -> None:
    """With no OTEL_* variable, the API is built without the SDK: nothing of it imported, no
    OpenTelemetry plugin, and a stage's span is one shared null context."""
    probe = """
import os, sys
from unittest import mock
from app.config import Settings
env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
env["COGNIS_DATABASE_URL"] = "postgresql+asyncpg://u:p@127.0.0.1:1/db"
with mock.patch.dict(os.environ, env, clear=True):
    from app.asgi import create_app
    from app import tracing
    from app.retrieval.timing import StageTimer
    app = create_app(Settings())
    timer = StageTimer()
    with timer.stage("bm25_ms"):
        pass
    assert timer.durations["bm25_ms"] >= 0
    assert not tracing.enabled()
    assert tracing.span("a") is tracing.span("b")
    assert tracing.traceparent() is None
    assert not [p for p in app.plugins if "OpenTelemetry" in type(p).__name__], app.plugins
    # Litestar imports its OpenTelemetry plugin's module (and the ASGI instrumentation) on
    # every app's creation when the package is installed; the SDK and the instrumentations
    # this service sets up are imported only to start tracing.
    set_up = ("sdk", "exporter", "instrumentation.sqlalchemy", "instrumentation.httpx")
    set_up += ("instrumentation.aiohttp_client",)
    loaded = [m for m in sys.modules if m.startswith(tuple(f"opentelemetry.{p}" for p in set_up))]
    assert not loaded, sorted(loaded)
print("off")
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COGNIS_", "OTEL_"))}
    result = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0 and result.stdout.strip() == "off", result.stderr[-3000:]


@dataclass
class TracedApi:
    app: Any
    exporter: InMemorySpanExporter

    def client(self) -> httpx.AsyncClient:
        transport = httpx.ASGITransport(app=self.app)
        return httpx.AsyncClient(
            transport=transport, base_url="http://cognis.test", headers={"X-API-Key": API_KEY}
        )

    def spans(self) -> list[Span]:
        return [_from_sdk(s) for s in self.exporter.get_finished_spans()]


@pytest.fixture(scope="module")
async def traced_api(migrated: dict[str, str], relay: ServiceProcess) -> AsyncIterator[TracedApi]:
    """The API in this process with tracing on and an in-memory exporter; it embeds through
    the run's model service (an HTTP call), its ingestion tasks in a queue of its own."""
    env = {
        **migrated,
        "COGNIS_RELAY_IN_API": "false",
        "COGNIS_INGEST_WORKER_IN_API": "false",
        "COGNIS_INGEST_QUEUE": f"traced-{uuid.uuid4().hex[:8]}",
    }
    with mock.patch.dict(os.environ, env, clear=True):
        settings = Settings()  # type: ignore[call-arg]
    exporter = InMemorySpanExporter()
    assert start_tracing(settings.api, "api", exporter=exporter)
    try:
        app = create_app(settings)
        async with lifespan_running(app):
            yield TracedApi(app, exporter)
    finally:
        stop_tracing()
    assert not tracing.enabled()


async def test_a_search_is_traced_stage_by_stage_in_process(
    traced_api: TracedApi, user_id: str
) -> None:
    marker = f"zebrafinch{uuid.uuid4().hex[:8]}"
    async with traced_api.client() as client:
        created = await client.post(
            f"/v1/users/{user_id}/memories",
            params={"wait_for": "indexed"},
            json={"content": f"My neighbour keeps a {marker} called Pip"},
        )
        assert created.status_code == 201, created.text
        traced_api.exporter.clear()
        query = f"what does my neighbour keep, the {marker}?"
        answer = await client.post(f"/v1/users/{user_id}/search", json={"query": query, "top_k": 5})
        assert answer.status_code == 200, answer.text
    spans = traced_api.spans()
    trace = check_search_trace(spans, answer.json())
    assert {s.service for s in trace} == {"cognis-api"}
    # By default no content: neither the query nor the memory, anywhere.
    assert marker not in _values(spans)
    assert all("?" not in str(s.attributes.get("http.target", "")) for s in trace)


async def test_content_only_when_the_operator_opts_in(
    traced_api: TracedApi, user_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert tracing._active is not None
    monkeypatch.setattr(tracing, "_active", dataclasses.replace(tracing._active, content=True))
    query = f"anything about quokka{uuid.uuid4().hex[:8]}?"
    async with traced_api.client() as client:
        traced_api.exporter.clear()
        answer = await client.post(f"/v1/users/{user_id}/search", json={"query": query})
        assert answer.status_code == 200, answer.text
    (search,) = [s for s in traced_api.spans() if s.name == "retrieval.search"]
    assert search.attributes["cognis.retrieval.query"] == query


async def test_an_ingestion_task_continues_the_trace_that_queued_it(
    traced_api: TracedApi, user_id: str
) -> None:
    marker = f"axolotl{uuid.uuid4().hex[:8]}"
    runtime = traced_api.app.state.runtime
    async with traced_api.client() as client:
        traced_api.exporter.clear()
        submitted = await client.post(
            f"/v1/users/{user_id}/messages",
            json={"messages": [{"content": f"I adopted an {marker} last week", "role": "user"}]},
        )
        assert submitted.status_code == 202, submitted.text
        job_id = submitted.json()["job_id"]
        # This API's own worker, on its own queue: one claim takes the message.
        assert await runtime.ingest_worker.run_once()
        job = await client.get(f"/v1/users/{user_id}/jobs/{job_id}")
        assert job.json()["state"] == "done", job.text
    spans = traced_api.spans()
    request, trace, by_id = _request_trace(spans, MESSAGES_ROUTE)
    (save,) = [s for s in trace if s.name == "ingest.save"]
    assert save.parent_id == request.span_id
    (batch,) = [s for s in trace if s.name == "ingest.batch"]
    assert batch.parent_id == save.span_id  # the worker continued the request's trace
    (message,) = [s for s in trace if s.name == "ingest.message"]
    assert message.parent_id == batch.span_id
    assert message.attributes["cognis.ingest.operations"] == ("ADD",)
    for step in ("ingest.candidates", "ingest.extract", "ingest.apply"):
        (found,) = [s for s in trace if s.name == step]
        assert "ingest.message" in _ancestors(found, by_id)
    embeds = [s for s in trace if s.name == "embedding.embed"]
    assert any("ingest.batch" in _ancestors(s, by_id) for s in embeds)
    assert marker not in _values(spans)


async def test_a_statement_is_traced_only_inside_a_recorded_span_and_fails_by_its_type(
    traced_api: TracedApi,
) -> None:
    """A statement below a recorded span is a CLIENT span with its placeholders; one outside
    any span (a background loop's poll) makes none; a failed one is marked by its error's
    type, never by Postgres' message, which quotes the value at fault."""
    engine = traced_api.app.state.runtime.engine
    secret = f"not-a-uuid-{uuid.uuid4().hex[:8]}"
    traced_api.exporter.clear()
    async with engine.connect() as connection:
        await connection.execute(sa_text("SELECT 1 AS untraced"))
        with tracing.span("probe"):
            await connection.execute(sa_text("SELECT CAST(:n AS int) AS traced"), {"n": 7})
            with pytest.raises(DBAPIError) as caught:
                await connection.execute(sa_text("SELECT CAST(:v AS uuid)"), {"v": secret})
    finished = traced_api.exporter.get_finished_spans()
    statements = {
        str((s.attributes or {}).get("db.statement")): s
        for s in finished
        if s.kind.name == "CLIENT"
    }
    assert not [st for st in statements if "untraced" in st]
    (probe,) = [s for s in finished if s.name == "probe"]
    (traced,) = [s for st, s in statements.items() if st.endswith("AS traced")]
    assert traced.name == "SELECT" and traced.parent == probe.context
    assert traced.attributes is not None and "$1" in str(traced.attributes["db.statement"])
    assert traced.attributes["db.system"] == "postgresql"
    assert traced.status.status_code.name == "UNSET"
    (failed,) = [s for st, s in statements.items() if "AS uuid" in st]
    assert failed.status.status_code.name == "ERROR"
    assert failed.attributes is not None
    error = type(caught.value.orig)
    assert failed.attributes["error.type"] == error.__qualname__
    assert failed.status.description == error.__name__
    # What Postgres (or the driver) said quotes the value; the span does not.
    assert secret in str(caught.value.orig)
    assert secret not in f"{failed.status.description} {failed.attributes!r}"


async def test_a_batch_job_continues_the_trace_that_queued_it(
    traced_api: TracedApi, user_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch create answered 202 stores its request's trace context with the job; the worker
    that writes the job, later, continues that trace: the job's span below the request's,
    its embedding and its write (with their statements) below the job's."""
    marker = f"okapi{uuid.uuid4().hex[:8]}"
    runtime = traced_api.app.state.runtime
    # The model service says the request's texts need more model time than its deadline (as
    # a busy one would of a big batch); the job's work, which has no deadline, goes through.
    embed = runtime.embedder.embed

    async def refused_within_a_deadline(texts: list[str], work: Any) -> Any:
        if work.deadline is not None:
            raise work.deadline.too_much(600.0, len(texts))
        return await embed(texts, work)

    monkeypatch.setattr(runtime.embedder, "embed", refused_within_a_deadline)
    memories = [{"content": f"The {marker} in pen {i} eats leaves at dawn"} for i in range(6)]
    async with traced_api.client() as client:
        traced_api.exporter.clear()
        accepted = await client.post(
            f"/v1/users/{user_id}/memories/batch", json={"memories": memories}
        )
        assert accepted.status_code == 202, accepted.text
        # This API's own worker, on its own queue, takes the job.
        assert await runtime.batch_worker.run_once()
        job = await client.get(accepted.headers["location"])
        assert job.json()["status"] == "done", job.text
    spans = traced_api.spans()
    request, trace, by_id = _request_trace(spans, BATCH_ROUTE)
    (run,) = [s for s in trace if s.name == "batch_job.run"]
    assert run.parent_id == request.span_id  # the worker continued the request's trace
    assert run.attributes["cognis.batch_job.id"] == accepted.json()["job_id"]
    assert run.attributes["cognis.batch_job.memories"] == len(memories)
    (write,) = [s for s in trace if s.name == "batch_job.write"]
    assert write.parent_id == run.span_id
    embeds = [s for s in trace if s.name == "embedding.embed" and s.parent_id == run.span_id]
    assert [
        (e.attributes["cognis.embedding.texts"], e.attributes["cognis.embedding.work_class"])
        for e in embeds
    ] == [(len(memories), "bulk")]
    inserts = [
        s
        for s in trace
        if s.kind == "CLIENT" and s.name.startswith("INSERT") and s.parent_id == write.span_id
    ]
    assert inserts, sorted(s.name for s in trace if s.parent_id == write.span_id)
    assert all("batch_job.run" in _ancestors(s, by_id) for s in (write, *embeds, *inserts))
    assert marker not in _values(spans)


# --- A real `python -m app serve` and model service, exporting OTLP to a receiver ----------


@dataclass
class TracedStack:
    receiver: OtlpReceiver
    api: ApiProcess


def _otel_env(receiver: OtlpReceiver) -> dict[str, str]:
    return {
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
        # Export within a fraction of a second, not the default 5 s.
        "OTEL_BSP_SCHEDULE_DELAY": "100",
    }


@pytest.fixture(scope="module")
def traced_stack(migrated: dict[str, str]) -> Iterator[TracedStack]:
    """A model service and an API, both started with OTEL_* variables pointing at a receiver
    on loopback; the model service runs the run's model on ONNX int8 (a quick load)."""
    receiver = OtlpReceiver()
    model = services.EmbeddingServer(
        services.embedding_model(),
        settings={
            **_otel_env(receiver),
            "OTEL_TRACES_EXPORTER": "otlp",
            "COGNIS_EMBEDDING_BACKEND": "onnx-int8",
        },
        log_name="test-embed-serve-traced.log",
    )
    api = None
    try:
        services.wait_until_loaded(model.url, "test-embed-serve-traced.log")
        env = {
            **migrated,
            **_otel_env(receiver),
            "COGNIS_EMBEDDING_HTTP_URL": f"{model.url}/v1",
            "COGNIS_RELAY_IN_API": "false",
            "COGNIS_INGEST_QUEUE": f"traced-otlp-{uuid.uuid4().hex[:8]}",
        }
        api = ApiProcess(env, "api-traced")
        api.wait_ready()
        yield TracedStack(receiver, api)
    finally:
        if api is not None:
            api.stop()
        model.stop()
        receiver.close()


async def test_a_served_search_and_message_reach_an_otlp_receiver(
    traced_stack: TracedStack, user_id: str
) -> None:
    receiver = traced_stack.receiver
    marker = f"pangolin{uuid.uuid4().hex[:8]}"
    async with traced_stack.api.client() as client:
        created = await client.post(
            f"/v1/users/{user_id}/memories", json={"content": f"Our {marker} sleeps all day"}
        )
        assert created.status_code == 201, created.text
        answer = await client.post(
            f"/v1/users/{user_id}/search",
            json={"query": f"when does the {marker} sleep?", "top_k": 5},
        )
        assert answer.status_code == 200, answer.text
        submitted = await client.post(
            f"/v1/users/{user_id}/messages",
            params={"wait": "true"},
            json={"messages": [{"content": f"The {marker} snores", "role": "user"}]},
        )
        assert submitted.status_code == 200, submitted.text

        def arrived(spans: list[ReceivedSpan]) -> bool:
            names = {(s.service, s.name) for s in spans}
            return {
                ("cognis-api", SEARCH_ROUTE),
                ("cognis-api", MESSAGES_ROUTE),
                ("cognis-api", "ingest.message"),
                ("cognis-model", "POST /v1/embeddings"),
            } <= names

        await asyncio.to_thread(receiver.wait_for, arrived, 60)
        # The model service's span of the query's embedding lands a little later, perhaps.
        await asyncio.sleep(0.5)
        spans = [_from_otlp(s) for s in receiver.snapshot()]

    trace = check_search_trace([s for s in spans if s.service == "cognis-api"], answer.json())
    (model_call,) = [s for s in trace if s.name == "POST /v1/embeddings"]
    served = [s for s in spans if s.service == "cognis-model" and s.parent_id == model_call.span_id]
    assert len(served) == 1, "the model service did not continue the search's trace"
    assert served[0].kind == "SERVER" and served[0].trace_id == model_call.trace_id
    assert served[0].attributes["cognis.embedding.work_class"] == "query"

    posted = _root(spans, MESSAGES_ROUTE)
    worked = [s for s in spans if s.name == "ingest.message" and s.trace_id == posted.trace_id]
    assert len(worked) == 1, "the ingestion task did not continue the message's trace"

    # Probes and the background loops' polls make no trace; every trace starts at a request
    # or a unit of work, never at a lone client call.
    assert not [s for s in spans if s.name in ("GET /health", "GET /ready", "GET /metrics")]
    roots = [s for s in spans if not s.parent_id]
    assert roots and all(s.kind != "CLIENT" for s in roots), {(s.name, s.kind) for s in roots}
    assert marker not in _values(spans)


async def test_the_traced_api_logs_its_trace_ids(traced_stack: TracedStack, user_id: str) -> None:
    """A search's log line names the trace that holds it."""
    async with traced_stack.api.client() as client:
        answer = await client.post(f"/v1/users/{user_id}/search", json={"query": "anything?"})
        assert answer.status_code == 200, answer.text

    async def logged() -> dict[str, Any] | None:
        for line in traced_stack.api.log_text().splitlines():
            if '"memory_retrieval"' in line and user_id in line:
                return json.loads(line)
        return None

    line = await wait_until(logged, timeout=10)
    searched = await asyncio.to_thread(
        traced_stack.receiver.wait_for,
        lambda spans: any(
            s.name == "retrieval.search" and s.trace_id == line["trace_id"] for s in spans
        ),
    )
    (search,) = [
        s for s in searched if s.trace_id == line["trace_id"] and s.name == "retrieval.search"
    ]
    assert line["span_id"] == search.span_id
