"""A small OpenAI-compatible embedding server: POST /v1/embeddings, backed by the local model.

`python -m app embed-serve` runs it, so several API or worker processes (or a separate embedder
container) share one loaded model through the "http" backend. The vectors are the store's: unit
length, 768 values (a smaller model's zero-padded); `dimensions` keeps the first n and
re-normalises them, the Matryoshka truncation that derives e256 from e768.
"""

from __future__ import annotations

import hmac
import os
from pathlib import Path
from typing import Annotated, Any, Literal

import anyio
import msgspec
import numpy as np
from litestar import Litestar, Request, Response, get, post
from litestar.datastructures import State
from litestar.exceptions import HTTPException, NotAuthorizedException, NotFoundException

from app.config import Settings, get_settings
from app.ml.batching import Work, WorkClass
from app.ml.embedder import Embedder, build_embedder, unit_prefix
from app.vocabulary import EMBEDDING_DIM

# OpenAI's own limit on inputs per request.
MAX_INPUTS = 2048


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


def served_embedder(settings: Settings) -> Embedder:
    if settings.embedding_backend == "http":
        # Pointing the server at an embedding server (perhaps itself) would only forward requests.
        raise ValueError(
            "embed-serve computes embeddings itself: set COGNIS_EMBEDDING_BACKEND to "
            "torch, onnx or onnx-int8"
        )
    return build_embedder(settings, settings.embedding_backend, settings.embedding_intra_op_threads)


def _same_model(requested: str | None, served: str) -> bool:
    # A hub name and a local folder of the same model end in the same name.
    return not requested or Path(requested).name == Path(served.rstrip("/")).name


def _authorise(request: Request, key: str | None) -> None:
    if key is None:
        return
    given = request.headers.get("authorization", "")
    if not hmac.compare_digest(given.encode(), f"Bearer {key}".encode()):
        raise NotAuthorizedException("a valid bearer key is required")


@post("/v1/embeddings", status_code=200)
async def create_embeddings(
    request: Request, data: EmbeddingRequest, state: State
) -> dict[str, Any]:
    _authorise(request, state.api_key)
    embedder: Embedder = state.embedder
    if not _same_model(data.model, embedder.model_name):
        raise NotFoundException(f"model {data.model!r} is not served here")
    texts = [data.input] if isinstance(data.input, str) else data.input
    # Its callers (API processes) have already scheduled the texts: served as they come,
    # shared between the callers that name themselves in `user`.
    embeddings = await embedder.embed(texts, Work(WorkClass.INTERACTIVE, user=data.user))
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
    }


@get("/health")
async def health(state: State) -> dict[str, Any]:
    return {"status": "ok", "model": state.embedder.model_name, "loaded": state.embedder.loaded}


def _openai_error(_: Request, exc: HTTPException) -> Response[dict[str, Any]]:
    """Errors in the shape OpenAI clients parse: {"error": {"message", "type", "code"}}."""
    kind = "invalid_request_error" if exc.status_code < 500 else "server_error"
    reasons = [e["message"] for e in exc.extra or [] if isinstance(e, dict) and "message" in e]
    message = "; ".join([str(exc.detail), *reasons])
    error = {"message": message, "type": kind, "code": exc.status_code}
    return Response({"error": error}, status_code=exc.status_code)


def create_embedding_app(settings: Settings | None = None) -> Litestar:
    settings = settings or standalone_settings()
    embedder = served_embedder(settings)
    key = settings.embedding_http_api_key

    async def load_model() -> None:
        await anyio.to_thread.run_sync(embedder.load)

    return Litestar(
        route_handlers=[create_embeddings, health],
        on_startup=[load_model],
        exception_handlers={HTTPException: _openai_error},
        state=State({"embedder": embedder, "api_key": key.get_secret_value() if key else None}),
        openapi_config=None,
    )
