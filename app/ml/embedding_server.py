"""The machine's model service: an OpenAI-compatible POST /v1/embeddings, and the one
scheduler of all model work.

`python -m app embed-serve` runs it (`make up` starts it; compose and terraform run it as a
service of its own), and every API, worker and CLI process embeds through it (the "http"
backend): one copy of the model per machine, and one queue. A request says whose work it is in
headers an OpenAI client never sends (app/ml/http_encoder.py): `X-Cognis-Work-Class` (query,
interactive, bulk, background; interactive when absent), `X-Cognis-Tenant`, OpenAI's own
`user`, and `X-Cognis-Deadline-Ms`. The micro-batcher (app/ml/scheduling/) then serves
queries first, then interactive writes, then bulk work, fairly between tenants and users within
a class, and background work only when nothing else waits, across every process; it plans with
the model's own speed per token. Queries have a model of their own (COGNIS_QUERY_EMBEDDING_
BACKEND, one core, ONNX int8 by default) on a thread of their own, so a query never waits for a
write's model call. Each answer says how its request waited (`cognis`: its class, the model
calls it waited for, milliseconds queued); GET /health reports the queues, the speed, and per
class how many requests waited for more than one model call.

The vectors are the store's: unit length, 768 values (a smaller model's zero-padded);
`dimensions` keeps the first n and re-normalises them, the Matryoshka truncation that derives
e256 from e768.

Only the service's own processes may use it: with COGNIS_EMBEDDING_HTTP_API_KEY set (`make up`
generates one) a request without that bearer key is 401. Inputs are bounded: at most
MAX_INPUTS texts (400) of MAX_TEXT_CHARS characters each (413). A request whose client goes
away (it disconnects: its timeout or deadline passed, or it was cancelled) leaves the queue at
once, so a retry never waits behind its own dead twin.
"""

from __future__ import annotations

import asyncio
import hmac
import math
import os
import uuid
from collections.abc import Awaitable
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

import anyio
import msgspec
import numpy as np
import structlog
from litestar import Litestar, Request, Response, get, post
from litestar.datastructures import State
from litestar.exceptions import (
    HTTPException,
    NotAuthorizedException,
    NotFoundException,
    ValidationException,
)

from app import tracing
from app.config import EmbeddingSettings, Settings, get_settings
from app.errors import DeadlineExceededError, TooMuchWorkError
from app.ml.embedder import Embedder, build_embedder, unit_prefix
from app.ml.http_encoder import (
    DEADLINE_ERROR,
    DEADLINE_HEADER,
    MAX_INPUTS,
    MAX_TEXT_CHARS,
    TENANT_HEADER,
    WORK_CLASS_HEADER,
)
from app.ml.scheduling.work import Deadline, Trace, Work, WorkClass
from app.tracing.setup import start_tracing
from app.tracing.web import request_tracing, route_naming
from app.vocabulary import EMBEDDING_DIM

log = structlog.get_logger(__name__)

WORK_CLASSES = {work_class.label: work_class for work_class in WorkClass}
T = TypeVar("T")


class EmbeddingRequest(msgspec.Struct):
    input: str | Annotated[list[str], msgspec.Meta(min_length=1, max_length=MAX_INPUTS)]
    model: str | None = None
    dimensions: Annotated[int, msgspec.Meta(ge=1, le=EMBEDDING_DIM)] | None = None
    encoding_format: Literal["float"] = "float"
    user: str | None = None


def standalone_settings() -> Settings:
    """Settings for a process that never opens the database.

    Settings insists on a database URL (no insecure defaults); an embedder container has none,
    so a placeholder that nothing connects to stands in when the variable is unset.
    """
    if os.environ.get("COGNIS_DATABASE_URL"):
        return get_settings()
    return Settings(database_url="postgresql+asyncpg://unused/unused")  # type: ignore[arg-type]


def served_embedder(embedding: EmbeddingSettings) -> Embedder:
    if embedding.embedding_backend == "http":
        # Pointing the server at an embedding server (perhaps itself) would only forward requests.
        raise ValueError(
            "embed-serve computes embeddings itself: set COGNIS_EMBEDDING_BACKEND to "
            "torch, onnx or onnx-int8"
        )
    return build_embedder(
        embedding,
        embedding.embedding_backend,
        embedding.embedding_intra_op_threads,
        cost_unit="tokens",
    )


def served_query_embedder(embedding: EmbeddingSettings, memories: Embedder) -> Embedder:
    """Queries' own model (COGNIS_QUERY_EMBEDDING_BACKEND), or the memories' one (`same`).
    `http`, which the settings choose for a process whose embedding backend is http (as the
    environment shared with the server's callers says), means the default here: this server is
    where http leads."""
    backend = embedding.query_embedding_backend
    if backend == "http":
        backend = EmbeddingSettings.model_fields["query_embedding_backend"].default
    if backend == "same":
        return memories
    return build_embedder(
        embedding,
        backend,
        embedding.query_embedding_intra_op_threads,
        cost_unit="tokens",
        queries=True,
    )


def requested_work(request: Request, user: str | None) -> Work:
    """Whose work a request is, from its headers (module docstring); 400 naming a bad one."""
    headers = request.headers
    label = headers.get(WORK_CLASS_HEADER, WorkClass.INTERACTIVE.label).strip().lower()
    if label not in WORK_CLASSES:
        raise ValidationException(
            f"{WORK_CLASS_HEADER} must be one of {', '.join(WORK_CLASSES)}, not {label[:32]!r}"
        )
    tenant = None
    if (tenant_header := headers.get(TENANT_HEADER)) is not None:
        try:
            tenant = uuid.UUID(tenant_header)
        except ValueError:
            raise ValidationException(f"{TENANT_HEADER} must be a UUID") from None
    deadline = None
    if (deadline_header := headers.get(DEADLINE_HEADER)) is not None:
        if not deadline_header.strip().isdigit() or int(deadline_header) < 1:
            raise ValidationException(f"{DEADLINE_HEADER} must be a positive whole number")
        deadline = Deadline.after_ms(int(deadline_header))
    return Work(WORK_CLASSES[label], tenant, user, deadline)


def _same_model(requested: str | None, served: str) -> bool:
    # A hub name and a local folder of the same model end in the same name.
    return not requested or Path(requested).name == Path(served.rstrip("/")).name


def _authorise(request: Request, key: str | None) -> None:
    if key is None:
        return
    given = request.headers.get("authorization", "")
    if not hmac.compare_digest(given.encode(), f"Bearer {key}".encode()):
        raise NotAuthorizedException("a valid bearer key is required")


def _bounded(texts: list[str]) -> list[str]:
    """The texts, or 413 naming the first beyond MAX_TEXT_CHARS (by position, never its text)."""
    for i, text in enumerate(texts):
        if len(text) > MAX_TEXT_CHARS:
            raise HTTPException(
                status_code=413,
                detail=f"input {i} has {len(text)} characters; at most {MAX_TEXT_CHARS} are "
                "taken (the model reads only the first few thousand)",
            )
    return texts


async def _until_disconnected(request: Request) -> None:
    """Returns once the client has gone (its body is read by now: the next ASGI message is the
    disconnect, or nothing until the response is sent)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def _while_connected(request: Request, work: Awaitable[list[T]]) -> list[T]:
    """`work`'s result, or its cancellation once the client disconnects: its queued texts
    leave the scheduler's queue (a cancelled request does) instead of being embedded for
    nobody."""
    done = asyncio.ensure_future(work)
    gone = asyncio.ensure_future(_until_disconnected(request))
    try:
        await asyncio.wait({done, gone}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
        if not done.done():
            done.cancel()
    if done.cancelled():
        raise HTTPException(status_code=499, detail="the client went away")
    return done.result()


@post("/v1/embeddings", status_code=200)
async def create_embeddings(
    request: Request, data: EmbeddingRequest, state: State
) -> dict[str, Any]:
    _authorise(request, state.api_key)
    embedder: Embedder = state.embedder
    if not _same_model(data.model, embedder.model_name):
        raise NotFoundException(f"model {data.model!r} is not served here")
    texts = _bounded([data.input] if isinstance(data.input, str) else data.input)
    work = requested_work(request, data.user)
    if work.work_class is WorkClass.QUERY:
        embedder = state.query_embedder
    trace = Trace()
    try:
        embeddings = await _while_connected(request, embedder.batcher.submit(texts, work, trace))
    except HTTPException:
        log.info("embed_serve.client_gone", work_class=work.work_class.label, texts=len(texts))
        raise
    # On the request's span, which continues the caller's trace (its traceparent header).
    tracing.annotate(
        {
            "cognis.embedding.work_class": work.work_class.label,
            "cognis.embedding.texts": len(texts),
            "cognis.embedding.waited_calls": trace.waited_calls,
            "cognis.embedding.queued_ms": round(trace.queued_s * 1000, 1),
        }
    )
    vectors = np.stack([e.full for e in embeddings])
    if data.dimensions is not None:
        vectors = unit_prefix(vectors, data.dimensions)
    return {
        "object": "list",
        "model": embedder.model_name,
        "data": [
            {"object": "embedding", "index": i, "embedding": vector.tolist()}
            for i, vector in enumerate(vectors)
        ],
        # The model's tokenizer is not consulted just to count; OpenAI clients accept zeros.
        "usage": {"prompt_tokens": 0, "total_tokens": 0},
        "cognis": {
            "work_class": work.work_class.label,
            "waited_calls": trace.waited_calls,
            "queued_ms": round(trace.queued_s * 1000, 1),
        },
    }


def scheduler_state(embedder: Embedder) -> dict[str, Any]:
    """An embedder's queue and the speed it plans with."""
    batcher = embedder.batcher
    per_unit = batcher.seconds_per_unit
    return {
        "backend": embedder.backend,
        "loaded": embedder.loaded,
        "cost_unit": embedder.cost_unit,
        "units_per_s": round(1 / per_unit, 1) if per_unit else None,
        "calls": batcher.stats.calls,
        "texts": batcher.stats.texts,
        "queued_texts": {c.label: batcher.queued(c) for c in WorkClass},
        # Since start, per class: requests that reached the model, those that waited for more
        # than one model call, and the most calls one waited for (a query's bound is one).
        "waited_calls": {c.label: asdict(batcher.stats.waits[c]) for c in WorkClass},
        "idle_s": None if math.isinf(idle := batcher.idle_s()) else round(idle, 1),
    }


@get("/health")
async def health(state: State) -> dict[str, Any]:
    embedder: Embedder = state.embedder
    queries: Embedder = state.query_embedder
    return {
        "status": "ok",
        "model": embedder.model_name,
        "loaded": embedder.loaded and queries.loaded,
        "pid": os.getpid(),
        "memories": scheduler_state(embedder),
        "queries": scheduler_state(queries) if queries is not embedder else "memories",
    }


def _scheduling_error(_: Request, exc: Exception) -> Response[dict[str, Any]]:
    """The scheduler's refusals, in OpenAI's error shape with what a caller acts on: a passed
    deadline is 503 + Retry-After (the model was busy: a state that passes), too much work for
    the whole deadline is 413 with the model time needed and the texts that would fit."""
    assert isinstance(exc, DeadlineExceededError | TooMuchWorkError)
    if isinstance(exc, DeadlineExceededError):
        error = {"message": exc.detail, "type": DEADLINE_ERROR, "code": 503}
        return Response({"error": error}, status_code=503, headers={"Retry-After": "1"})
    error = {"message": exc.detail, "type": "too_much_work", "code": 413, **exc.extra}
    return Response({"error": error}, status_code=413)


def _openai_error(_: Request, exc: HTTPException) -> Response[dict[str, Any]]:
    """Errors in the shape OpenAI clients parse: {"error": {"message", "type", "code"}}."""
    kind = "invalid_request_error" if exc.status_code < 500 else "server_error"
    reasons = [e["message"] for e in exc.extra or [] if isinstance(e, dict) and "message" in e]
    message = "; ".join([str(exc.detail), *reasons])
    error = {"message": message, "type": kind, "code": exc.status_code}
    return Response({"error": error}, status_code=exc.status_code)


def _unexpected_error(request: Request, exc: Exception) -> Response[dict[str, Any]]:
    """Anything else: logged with its traceback (an operator's only clue), and a 500 in
    OpenAI's shape naming the kind of failure."""
    log.exception("embed_serve.unhandled_error", path=request.url.path, error=repr(exc))
    message = f"the model service failed on this request ({type(exc).__name__}); it is logged"
    error = {"message": message, "type": "server_error", "code": 500}
    return Response({"error": error}, status_code=500)


def create_embedding_app(settings: Settings | None = None) -> Litestar:
    settings = settings or standalone_settings()
    start_tracing(settings.api, "model")
    embedder = served_embedder(settings.embedding)
    query_embedder = served_query_embedder(settings.embedding, embedder)
    key = settings.embedding.embedding_http_api_key
    if key is None:
        log.warning(
            "embed_serve.no_key",
            hint="any process that reaches this port can embed: set COGNIS_EMBEDDING_HTTP_API_KEY",
        )

    async def load_models() -> None:
        # Before the first request: costs are counted in the model's tokens.
        await anyio.to_thread.run_sync(embedder.load)
        await anyio.to_thread.run_sync(query_embedder.load)

    return Litestar(
        route_handlers=[create_embeddings, health],
        plugins=request_tracing(["/health"]),
        middleware=route_naming(),
        on_startup=[load_models],
        exception_handlers={
            HTTPException: _openai_error,
            DeadlineExceededError: _scheduling_error,
            TooMuchWorkError: _scheduling_error,
            Exception: _unexpected_error,
        },
        state=State(
            {
                "embedder": embedder,
                "query_embedder": query_embedder,
                "api_key": key.get_secret_value() if key else None,
            }
        ),
        openapi_config=None,
    )
