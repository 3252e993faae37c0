"""The "http" embedding backend: another server's OpenAI-compatible POST {url}/embeddings.

Writes run in a worker thread, hence synchronous (httpx.Client, which is thread-safe); a query
is sent from the event loop itself (`encode_query`, httpx.AsyncClient: no thread hop).
`encode_work` sends a request's texts with the work they are for, in headers an
OpenAI-compatible server ignores and `embed-serve` schedules by (the headers below): the class, the
tenant, the user (OpenAI's own `user` field) and the time left before the deadline. The server's
refusals come back as this process's own: 503 "deadline" as DeadlineExceededError, 413 as
TooMuchWorkError, neither retried (the deadline is the caller's, and a refusal for size would
be the same again).
Connection errors, timeouts, 429 and 5xx are retried with jittered exponential backoff and then
raised as EmbedderUnavailableError (503); an answer that is not one vector of numbers per text,
all of one dimension, is EmbedderAnswerError (502). Messages name the URL and the cause, never
the texts, since they end up in logs and in problem details.
While the server is known to be unavailable (the last request failed so, none has succeeded
since) a query tries once, without retries: a search then answers from BM25 alone at once
rather than after the backoff (app/retrieval/legs.py). `probe` asks the server's /health, for
the API's /ready.
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass
from typing import Any, NoReturn

import httpx
import numpy as np
import structlog
from pydantic import SecretStr

from app.config import EmbeddingSettings
from app.errors import EmbedderAnswerError, EmbedderUnavailableError
from app.ml.scheduling.work import Work, WorkClass
from app.tracing.setup import trace_http_client
from app.vocabulary import EMBEDDING_DIM, MAX_CONTENT_CHARS

log = structlog.get_logger(__name__)

# 408/429 and 5xx are about the server's state, not the request: worth another try.
RETRYABLE_STATUS = frozenset({408, 429})
# The work a request is for, read by embed-serve (app/ml/embedding_server.py); the user goes in
# OpenAI's own `user` field.
WORK_CLASS_HEADER = "X-Cognis-Work-Class"
TENANT_HEADER = "X-Cognis-Tenant"
DEADLINE_HEADER = "X-Cognis-Deadline-Ms"
# The error type embed-serve answers a request whose deadline passed in its queue with (503).
DEADLINE_ERROR = "deadline_exceeded"
# The most texts in one request (OpenAI's own limit, which embed-serve keeps).
MAX_INPUTS = 2048
# The longest text embed-serve takes, in characters (longer: 413). The models read at most 384
# tokens (about 2,000 characters of English) and truncate the rest, but tokenize the whole text
# first: a 9.9 MB string held the model service's CPU for ~21 s. Four memories' worth leaves
# room for a memory with its context; this client cuts a longer text to it before sending (the
# cut never reaches what the model reads).
MAX_TEXT_CHARS = 4 * MAX_CONTENT_CHARS

# What a refusal most likely means, so the error points at the setting to check.
REFUSAL_HINTS = {
    401: "check COGNIS_EMBEDDING_HTTP_API_KEY",
    403: "check COGNIS_EMBEDDING_HTTP_API_KEY",
    404: "check COGNIS_EMBEDDING_HTTP_URL (the API root, e.g. http://host:8080/v1) and the model",
}


@dataclass(frozen=True, slots=True)
class HttpEndpoint:
    """Where and how to ask for embeddings."""

    url: str
    model: str
    api_key: SecretStr | None = None
    dimensions: int | None = None
    timeout_s: float = 10.0
    # How long a request without a deadline may wait in the server's queue (bulk and background
    # work wait there while queries and writes go first).
    queue_timeout_s: float = 600.0
    max_retries: int = 2
    backoff_base_s: float = 0.25

    @classmethod
    def from_settings(cls, embedding: EmbeddingSettings) -> HttpEndpoint:
        if not embedding.embedding_http_url:
            raise ValueError("the http embedding backend needs COGNIS_EMBEDDING_HTTP_URL")
        return cls(
            url=embedding.embedding_http_url,
            model=embedding.embedding_http_model or embedding.embedding_model,
            api_key=embedding.embedding_http_api_key,
            dimensions=embedding.embedding_http_dimensions,
            timeout_s=embedding.embedding_http_timeout_s,
            queue_timeout_s=embedding.embedding_http_queue_timeout_s,
            max_retries=embedding.embedding_http_max_retries,
            backoff_base_s=embedding.embedding_http_backoff_base_s,
        )

    @property
    def embeddings_url(self) -> str:
        return self.url.rstrip("/") + "/embeddings"


class HttpEncoder:
    """encode(texts) -> (n, dim) float32, like the local encoders, computed by a remote server."""

    def __init__(self, endpoint: HttpEndpoint) -> None:
        headers = {}
        if endpoint.api_key is not None:
            headers["Authorization"] = f"Bearer {endpoint.api_key.get_secret_value()}"
        self.endpoint = endpoint
        self.url = endpoint.embeddings_url
        # Known up front only when asked for; otherwise the first answer fixes it, and every later
        # answer must agree: vectors of two sizes in one store would be silently incomparable.
        self.dimension: int | None = endpoint.dimensions
        self._client = httpx.Client(headers=headers, timeout=endpoint.timeout_s)
        # While tracing: a span per request, and its traceparent header, which the model
        # service's request span continues (app/ml/embedding_server.py).
        trace_http_client(self._client)
        # Queries' own, on the event loop (`encode_query`); made in the loop that uses it.
        self._async_client: httpx.AsyncClient | None = None
        self._async_loop: asyncio.AbstractEventLoop | None = None
        # Why the last request found the server unavailable; None once one succeeds.
        self.unavailable: str | None = None

    def probe(self, timeout_s: float = 2.0) -> str | None:
        """None when the server answers its /health (embed-serve's, at the URL's root) with its
        model loaded, or answers at all (another OpenAI-compatible server may have no /health);
        else why it cannot embed now: "unreachable: <cause>", "unavailable: HTTP <status>" or
        "loading"."""
        try:
            response = self._client.get(
                httpx.URL(self.endpoint.url).copy_with(path="/health", query=None),
                timeout=timeout_s,
            )
        except httpx.TransportError as exc:
            return f"unreachable: {type(exc).__name__}"
        if response.status_code >= 500:
            return f"unavailable: HTTP {response.status_code}"
        try:
            loaded = response.json().get("loaded") if response.status_code == 200 else None
        except (ValueError, AttributeError):
            loaded = None
        return "loading" if loaded is False else None

    def close(self) -> None:
        self._client.close()

    def encode(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension or 0), dtype=np.float32)
        size = max(batch_size, 1)
        return np.concatenate(
            [self._embed_chunk(texts[start : start + size]) for start in range(0, len(texts), size)]
        )

    def encode_work(self, texts: list[str], work: Work) -> np.ndarray:
        """The texts' vectors, asked for in one request (per MAX_INPUTS texts) that says whose
        work they are, so the server schedules them among every process's work."""
        return np.concatenate(
            [
                self._embed_chunk(texts[start : start + MAX_INPUTS], work)
                for start in range(0, len(texts), MAX_INPUTS)
            ]
        )

    async def encode_query(self, texts: list[str], work: Work) -> np.ndarray:
        """`encode_work` on the caller's event loop, over a kept-alive connection of its own:
        a query's one request takes no hop to a worker thread and back (each costs a wake-up
        on a busy machine; docs/benchmarks/search-latency.md)."""
        chunks = [texts[start : start + MAX_INPUTS] for start in range(0, len(texts), MAX_INPUTS)]
        vectors = []
        for chunk in chunks:
            body, headers, timeout = self._request(chunk, work)
            response = await self._post_async(body, headers, timeout, work)
            vectors.append(self._checked(response, len(chunk)))
        return np.concatenate(vectors)

    def _embed_chunk(self, texts: list[str], work: Work | None = None) -> np.ndarray:
        body, headers, timeout = self._request(texts, work)
        return self._checked(self._post(body, headers, timeout, work), len(texts))

    def _request(
        self, texts: list[str], work: Work | None
    ) -> tuple[dict[str, Any], dict[str, str], float]:
        """The body, the headers that say whose work it is, and the request's timeout."""
        body: dict[str, Any] = {
            "model": self.endpoint.model,
            "input": [text[:MAX_TEXT_CHARS] for text in texts],
        }
        if self.endpoint.dimensions is not None:
            body["dimensions"] = self.endpoint.dimensions
        headers, timeout = {}, self.endpoint.timeout_s
        if work is not None:
            headers[WORK_CLASS_HEADER] = work.work_class.label
            if work.tenant is not None:
                headers[TENANT_HEADER] = str(work.tenant)
            if work.user is not None:
                body["user"] = work.user
            if work.deadline is not None:
                remaining_ms = max(1, int(work.deadline.remaining_s() * 1000))
                headers[DEADLINE_HEADER] = str(remaining_ms)
                timeout = remaining_ms / 1000 + self.endpoint.timeout_s
            elif work.work_class is not WorkClass.QUERY:
                timeout = self.endpoint.queue_timeout_s
        return body, headers, timeout

    def _checked(self, response: httpx.Response, expected: int) -> np.ndarray:
        vectors = self._vectors(response, expected)
        if self.dimension is not None and vectors.shape[1] != self.dimension:
            self._invalid(f"{vectors.shape[1]} dimensions where {self.dimension} are expected")
        self.dimension = vectors.shape[1]
        return vectors

    def _post(
        self,
        body: dict[str, Any],
        headers: dict[str, str] | None = None,
        timeout: float | None = None,
        work: Work | None = None,
    ) -> httpx.Response:
        attempt, retries = 0, self._retries(work)
        while True:
            try:
                response = self._client.post(
                    self.url,
                    json=body,
                    headers=headers,
                    timeout=timeout if timeout is not None else self.endpoint.timeout_s,
                )
            except httpx.TransportError as exc:  # connection refused/reset, timeouts
                cause = _transport_cause(exc)
            else:
                refusal = self._refusal(response, work, body)
                if refusal is None:
                    return response
                cause = refusal
            delay = self._next_try(attempt, retries, cause)
            attempt += 1
            time.sleep(delay)

    async def _post_async(
        self, body: dict[str, Any], headers: dict[str, str], timeout_s: float, work: Work
    ) -> httpx.Response:
        """`_post` on the event loop: the same tries and the same errors."""
        client, attempt, retries = self._async_client_here(), 0, self._retries(work)
        while True:
            try:
                response = await client.post(
                    self.url, json=body, headers=headers, timeout=timeout_s
                )
            except httpx.TransportError as exc:
                cause = _transport_cause(exc)
            else:
                refusal = self._refusal(response, work, body)
                if refusal is None:
                    return response
                cause = refusal
            delay = self._next_try(attempt, retries, cause)
            attempt += 1
            await asyncio.sleep(delay)

    def _async_client_here(self) -> httpx.AsyncClient:
        """This event loop's client (a test session or a CLI command may run several loops
        one after another; a connection belongs to the loop that opened it)."""
        loop = asyncio.get_running_loop()
        if self._async_client is None or self._async_loop is not loop:
            self._async_client = httpx.AsyncClient(
                headers=self._client.headers, timeout=self.endpoint.timeout_s
            )
            trace_http_client(self._async_client)
            self._async_loop = loop
        return self._async_client

    def _retries(self, work: Work | None) -> int:
        # A query while the server is known to be down tries once: the search answers from
        # BM25 alone instead of waiting out the backoff (the next query tries again).
        down = self.unavailable is not None
        if down and work is not None and work.work_class is WorkClass.QUERY:
            return 0
        return self.endpoint.max_retries

    def _refusal(
        self, response: httpx.Response, work: Work | None, body: dict[str, Any]
    ) -> str | None:
        """None for an answer; the cause of a failure worth another try; raises for a refusal
        that would be the same again."""
        status = response.status_code
        if status < 400:
            self.unavailable = None
            return None
        if work is not None and work.deadline is not None:
            _raise_scheduling_refusal(response, work, len(body["input"]))
        cause = f"HTTP {status} {response.reason_phrase}".rstrip()
        if status not in RETRYABLE_STATUS and status < 500:
            hint = REFUSAL_HINTS.get(status)
            self._invalid(f"refused the request ({cause})" + (f": {hint}" if hint else ""))
        return cause

    def _next_try(self, attempt: int, retries: int, cause: str) -> float:
        """The backoff before another try, or EmbedderUnavailableError when none is left."""
        if attempt >= retries:
            self.unavailable = cause
            raise EmbedderUnavailableError(
                f"embedding server {self.url} is unavailable after {attempt + 1} "
                f"attempt(s): {cause}"
            )
        delay = self.endpoint.backoff_base_s * (2**attempt) * random.uniform(0.5, 1.0)
        log.warning(
            "embedder.http_retrying",
            url=self.url,
            attempt=attempt + 1,
            error=cause,
            delay_s=round(delay, 3),
        )
        return delay

    def _vectors(self, response: httpx.Response, expected: int) -> np.ndarray:
        """The answer's vectors in input order, or EmbedderAnswerError naming what is wrong."""
        try:
            body = response.json()
        except ValueError:
            self._invalid("answered with something other than JSON")
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, list):
            self._invalid("answered without a 'data' list")
        if len(data) != expected:
            self._invalid(f"returned {len(data)} embeddings for {expected} texts")
        if not all(isinstance(item, dict) for item in data):
            self._invalid("returned 'data' items that are not objects")
        indices = [item.get("index") for item in data]
        if sorted(i for i in indices if isinstance(i, int)) != list(range(expected)):
            self._invalid(f"returned indices {indices[:10]} instead of 0..{expected - 1}")
        rows = [item.get("embedding") for item in sorted(data, key=lambda item: item["index"])]
        if not all(isinstance(row, list) for row in rows):
            self._invalid("returned an embedding that is not a list of numbers")
        sizes = sorted({len(row) for row in rows})
        if len(sizes) != 1:
            self._invalid(f"returned embeddings of different dimensions {sizes}")
        if not all(
            isinstance(x, int | float) and not isinstance(x, bool) for row in rows for x in row
        ):
            self._invalid("returned an embedding with a value that is not a number")
        vectors = np.asarray(rows, dtype=np.float32).reshape(expected, sizes[0])
        if not 0 < sizes[0] <= EMBEDDING_DIM:
            self._invalid(f"returned {sizes[0]} dimensions; 1 to {EMBEDDING_DIM} are supported")
        if not np.isfinite(vectors).all():
            self._invalid("returned an embedding with a value that is not finite")
        return vectors

    def _invalid(self, what: str) -> NoReturn:
        raise EmbedderAnswerError(f"embedding server {self.url} {what}")


def _transport_cause(exc: httpx.TransportError) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _raise_scheduling_refusal(response: httpx.Response, work: Work, texts: int) -> None:
    """embed-serve's refusals of work with a deadline, as this process's own errors: the
    deadline passed in its queue (503 deadline_exceeded), or the texts need more model time
    than the whole deadline (413). Anything else returns, to be retried or reported."""
    assert work.deadline is not None
    try:
        error = response.json().get("error") or {}
    except (ValueError, AttributeError):
        return
    if response.status_code == 503 and error.get("type") == DEADLINE_ERROR:
        raise work.deadline.refusal()
    if response.status_code == 413 and isinstance(error.get("needed_ms"), int | float):
        raise work.deadline.too_much(error["needed_ms"] / 1000, texts)
