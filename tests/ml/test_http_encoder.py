"""The "http" embedding backend over real loopback HTTP.

embed-serve's app runs in-process (uvicorn in a thread) with the provisioned model, and its vectors
are compared with the same model run locally. Failure modes use a scripted HTTP server on
127.0.0.1 that answers whatever each test tells it to; nothing in httpx is mocked.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import numpy as np
import pytest
import uvicorn
from pydantic import SecretStr

from app.config import Settings
from app.errors import EmbedderAnswerError, EmbedderUnavailableError
from app.ml.embedder import Embedder, matryoshka
from app.ml.embedding_server import (
    create_embedding_app,
    served_embedder,
    served_query_embedder,
)
from app.ml.http_encoder import WORK_CLASS_HEADER, HttpEncoder, HttpEndpoint
from app.ml.scheduling.work import Work, WorkClass
from app.vocabulary import COARSE_DIM, EMBEDDING_DIM
from bench.ports import free_port
from tests import services

SENTENCES = [
    "Caroline went to the LGBTQ support group on 7 May 2023.",
    "Melanie is planning a camping trip with her kids to the mountains.",
    "What did you think of the pottery class?",
    "ok",
    "Her favourite food is Thai green curry.",
]
SERVER_KEY = "embed-test-key"


def _endpoint(url: str, **overrides: Any) -> HttpEndpoint:
    # Quick retries: the tests count attempts, they do not measure the backoff.
    fields: dict[str, Any] = {"model": "m", "timeout_s": 5.0, "backoff_base_s": 0.01}
    return HttpEndpoint(url=url, **{**fields, **overrides})


# --- the real model behind embed-serve ---------------------------------------------------------


@pytest.fixture(scope="module")
def embed_server(model_path: str) -> Iterator[str]:
    """embed-serve's app on a loopback port; yields its API root."""
    settings = Settings(
        database_url="postgresql+asyncpg://unused/unused",  # type: ignore[arg-type]
        embedding_model=model_path,
        embedding_http_api_key=SecretStr(SERVER_KEY),
    )
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(
            create_embedding_app(settings), host="127.0.0.1", port=port, log_level="warning"
        )
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 180
    while not server.started:  # set once start-up (which loads the model) has finished
        if not thread.is_alive() or time.monotonic() > deadline:
            pytest.fail("the embedding server did not start")
        time.sleep(0.1)
    yield f"http://127.0.0.1:{port}/v1"
    server.should_exit = True
    thread.join(timeout=30)


@pytest.fixture(scope="module")
def local_vectors(model_path: str) -> np.ndarray:
    return np.stack([e.full for e in Embedder(model_path).embed_sync(SENTENCES)])


def test_http_backend_agrees_with_the_local_model_in_input_order(
    embed_server: str, model_path: str, local_vectors: np.ndarray
) -> None:
    endpoint = _endpoint(embed_server, model=model_path, api_key=SecretStr(SERVER_KEY))
    # Batches of 2: five texts take three requests, whose answers must line up again.
    embedder = Embedder(model_path, backend="http", http_endpoint=endpoint, batch_size=2)

    vectors = np.stack([e.full for e in embedder.embed_sync(SENTENCES)])

    assert vectors.shape == (len(SENTENCES), EMBEDDING_DIM)
    similarity = vectors @ local_vectors.T
    assert np.diag(similarity).min() > 0.999, np.diag(similarity)
    assert list(similarity.argmax(axis=1)) == list(range(len(SENTENCES)))


def test_dimensions_truncate_and_renormalise_like_the_coarse_vector(
    embed_server: str, model_path: str
) -> None:
    endpoint = _endpoint(
        embed_server, model=model_path, api_key=SecretStr(SERVER_KEY), dimensions=COARSE_DIM
    )
    encoder = HttpEncoder(endpoint)

    vectors = encoder.encode(SENTENCES[:2])

    local = Embedder(model_path).embed_sync(SENTENCES[:2])
    assert vectors.shape == (2, COARSE_DIM) and encoder.dimension == COARSE_DIM
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    for vector, expected in zip(vectors, local, strict=True):
        assert float(vector @ expected.coarse) > 0.999


def test_a_wrong_key_is_refused_without_retrying(embed_server: str, model_path: str) -> None:
    encoder = HttpEncoder(_endpoint(embed_server, model=model_path, api_key=SecretStr("wrong")))

    with pytest.raises(EmbedderAnswerError, match=r"401.*COGNIS_EMBEDDING_HTTP_API_KEY"):
        encoder.encode(["hello"])


def test_another_model_name_is_refused(embed_server: str) -> None:
    encoder = HttpEncoder(
        _endpoint(embed_server, model="some-other-model", api_key=SecretStr(SERVER_KEY))
    )

    with pytest.raises(EmbedderAnswerError, match="404"):
        encoder.encode(["hello"])


async def test_a_query_is_sent_from_the_event_loop_and_answered_by_the_query_model(
    embed_server: str, model_path: str
) -> None:
    endpoint = _endpoint(embed_server, model=model_path, api_key=SecretStr(SERVER_KEY))
    embedder = Embedder(model_path, backend="http", http_endpoint=endpoint)
    writes = HttpEncoder(endpoint)

    query = await embedder.embed_query(SENTENCES[2])
    # The same text through the writes' thread and client, asked for as a query too.
    (threaded,) = writes.encode_work([SENTENCES[2]], Work(WorkClass.QUERY))
    (written,) = writes.encode_work([SENTENCES[2]], Work(WorkClass.INTERACTIVE))

    # The very vector the threaded path gets (the server's query model answered both) ...
    np.testing.assert_array_equal(query.full, matryoshka(threaded[None])[0].full)
    # ... which is the int8 query model's, not the memories' model's (close, not equal).
    assert 0.95 < float(threaded @ written) < 0.99999
    assert not embedder._senders._threads  # no worker thread was used for it


def test_a_querys_vector_does_not_depend_on_the_queries_it_shares_a_call_with(
    embed_server: str, model_path: str
) -> None:
    encoder = HttpEncoder(_endpoint(embed_server, model=model_path, api_key=SecretStr(SERVER_KEY)))
    together = encoder.encode_work(SENTENCES, Work(WorkClass.QUERY))
    alone = np.concatenate([encoder.encode_work([s], Work(WorkClass.QUERY)) for s in SENTENCES])

    np.testing.assert_array_equal(together, alone)


# --- a scripted server for the failure modes ---------------------------------------------------

Answer = tuple[int, Any] | Callable[[list[str]], tuple[int, Any]]


class ScriptedServer:
    """Answers each POST with the next scripted (status, JSON body); the last one repeats.

    A callable answer gets the request's texts; a float body means "sleep that long, then 200".
    """

    def __init__(self, answers: list[Answer]) -> None:
        self.answers = answers
        self.requests: list[dict[str, Any]] = []
        self.work_classes: list[str | None] = []
        script = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                script.requests.append(body)
                script.work_classes.append(self.headers.get(WORK_CLASS_HEADER))
                answer = script.answers[min(len(script.requests), len(script.answers)) - 1]
                status, payload = answer(body["input"]) if callable(answer) else answer
                if isinstance(payload, float):
                    time.sleep(payload)
                    status, payload = 200, _answer(body["input"])
                raw = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(raw)))
                    self.end_headers()
                    self.wfile.write(raw)
                except OSError:  # the client gave up waiting: that is the point of the test
                    pass

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"
        # A short poll: close() waits for the loop to look (0.5 s by default, at every test).
        serve = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)
        serve.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def _answer(texts: list[str], dim: int = 4) -> dict[str, Any]:
    """A well-formed answer: text i embeds as [i+1, 0, ...]."""
    return {
        "object": "list",
        "data": [
            {"object": "embedding", "index": i, "embedding": [float(i + 1)] + [0.0] * (dim - 1)}
            for i in range(len(texts))
        ],
    }


def _ok(texts: list[str]) -> tuple[int, Any]:
    return 200, _answer(texts)


@pytest.fixture
def scripted() -> Iterator[Callable[[list[Answer]], ScriptedServer]]:
    servers: list[ScriptedServer] = []

    def start(answers: list[Answer]) -> ScriptedServer:
        servers.append(ScriptedServer(answers))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def test_nothing_listening_is_unavailable_after_the_retries() -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    encoder = HttpEncoder(_endpoint(url, max_retries=2))

    with pytest.raises(EmbedderUnavailableError) as raised:
        encoder.encode(["a private memory"])

    message = str(raised.value)
    assert f"{url}/embeddings" in message and "3 attempt" in message and "Connect" in message
    assert "private memory" not in message
    assert raised.value.status_code == 503 and raised.value.retry_after_s


@pytest.mark.parametrize("status", [500, 503, 429])
def test_a_transient_failure_is_retried(scripted, status: int) -> None:
    server = scripted([(status, {"error": "busy"}), _ok])
    encoder = HttpEncoder(_endpoint(server.url, max_retries=2))

    vectors = encoder.encode(["one", "two"])

    assert len(server.requests) == 2
    np.testing.assert_allclose(vectors[:, 0], [1.0, 2.0])


def test_a_client_error_is_not_retried(scripted) -> None:
    server = scripted([(400, {"error": {"message": "bad"}})])
    encoder = HttpEncoder(_endpoint(server.url, max_retries=3))

    with pytest.raises(EmbedderAnswerError, match="400"):
        encoder.encode(["one"])
    assert len(server.requests) == 1


def test_a_server_slower_than_the_timeout_is_unavailable(scripted) -> None:
    server = scripted([(200, 2.0)])
    encoder = HttpEncoder(_endpoint(server.url, timeout_s=0.3, max_retries=1))

    started = time.monotonic()
    with pytest.raises(EmbedderUnavailableError, match="Timeout"):
        encoder.encode(["one"])

    assert len(server.requests) == 2
    assert time.monotonic() - started < 1.9  # gave up on its own timeout, not the server's pace


def test_requests_are_split_by_batch_size_and_carry_model_and_dimensions(scripted) -> None:
    server = scripted([_ok])
    encoder = HttpEncoder(_endpoint(server.url, model="mpnet", dimensions=4))

    vectors = encoder.encode([f"text {i}" for i in range(5)], batch_size=2)

    assert [len(r["input"]) for r in server.requests] == [2, 2, 1]
    assert {(r["model"], r["dimensions"]) for r in server.requests} == {("mpnet", 4)}
    np.testing.assert_allclose(vectors[:, 0], [1, 2, 1, 2, 1])


def test_answers_are_put_back_in_input_order_by_index(scripted) -> None:
    server = scripted([lambda texts: (200, {"data": _answer(texts)["data"][::-1]})])

    vectors = HttpEncoder(_endpoint(server.url)).encode(["a", "b", "c"])

    np.testing.assert_allclose(vectors[:, 0], [1.0, 2.0, 3.0])


def _with(texts: list[str], change: Callable[[list[dict[str, Any]]], Any]) -> tuple[int, Any]:
    """A well-formed answer, then spoilt by `change` (which edits its data list in place)."""
    answer = _answer(texts)
    change(answer["data"])
    return 200, answer


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (lambda t: _with(t, lambda d: d.pop()), "1 embeddings for 2 texts"),
        (lambda t: (200, _answer(t, dim=EMBEDDING_DIM + 1)), "769 dimensions"),
        (lambda t: _with(t, lambda d: d[1]["embedding"].append(0.0)), "different dimensions"),
        (lambda t: _with(t, lambda d: d[0].update(embedding=["1", 0, 0, 0])), "not a number"),
        (lambda t: _with(t, lambda d: d[0].update(embedding="AAAA")), "not a list of numbers"),
        (lambda t: _with(t, lambda d: d[1].update(index=0)), "indices"),
        (lambda t: (200, {"embeddings": []}), "'data'"),
        (lambda t: (200, "just text"), "'data'"),
    ],
    ids=["count", "too-many-dims", "mixed-dims", "string", "base64", "index", "no-data", "text"],
)
def test_a_malformed_answer_names_what_is_wrong(scripted, answer: Answer, message: str) -> None:
    server = scripted([answer])
    encoder = HttpEncoder(_endpoint(server.url, max_retries=2))

    with pytest.raises(EmbedderAnswerError, match=message) as raised:
        encoder.encode(["one", "two"])

    assert server.url in str(raised.value) and raised.value.status_code == 502
    assert len(server.requests) == 1  # a wrong answer is not a transient failure


def test_the_dimension_may_not_change_between_answers(scripted) -> None:
    server = scripted([lambda t: (200, _answer(t, dim=4)), lambda t: (200, _answer(t, dim=6))])
    encoder = HttpEncoder(_endpoint(server.url))

    encoder.encode(["one"])
    with pytest.raises(EmbedderAnswerError, match="6 dimensions where 4 are expected"):
        encoder.encode(["two"])


async def test_a_query_from_the_event_loop_is_retried_and_fails_like_a_write(scripted) -> None:
    server = scripted([(503, {"error": "busy"}), _ok])
    encoder = HttpEncoder(_endpoint(server.url, max_retries=2))

    vectors = await encoder.encode_query(["one", "two"], Work(WorkClass.QUERY))

    assert len(server.requests) == 2 and server.work_classes == ["query", "query"]
    np.testing.assert_allclose(vectors[:, 0], [1.0, 2.0])
    server.answers = [(500, {"error": "down"})]
    with pytest.raises(EmbedderUnavailableError, match="3 attempt"):
        await encoder.encode_query(["one"], Work(WorkClass.QUERY))
    # Known to be down: the next query tries once, so its search answers from BM25 at once.
    with pytest.raises(EmbedderUnavailableError, match="1 attempt"):
        await encoder.encode_query(["one"], Work(WorkClass.QUERY))
    assert len(server.requests) == 2 + 3 + 1


async def test_a_query_from_the_event_loop_checks_the_answer(scripted) -> None:
    server = scripted([lambda texts: (200, {"data": _answer(texts)["data"][:1]})])
    encoder = HttpEncoder(_endpoint(server.url))

    with pytest.raises(EmbedderAnswerError, match="1 embeddings for 2 texts"):
        await encoder.encode_query(["one", "two"], Work(WorkClass.QUERY))


def test_the_http_backend_needs_a_url() -> None:
    with pytest.raises(ValueError, match="COGNIS_EMBEDDING_HTTP_URL"):
        Settings(database_url="postgresql+asyncpg://x/y", embedding_backend="http")  # type: ignore[arg-type]
    settings = Settings(
        database_url="postgresql+asyncpg://x/y",  # type: ignore[arg-type]
        embedding_backend="http",
        embedding_http_url="http://127.0.0.1:1/v1/",
    )
    endpoint = HttpEndpoint.from_settings(settings.embedding)
    assert endpoint.embeddings_url == "http://127.0.0.1:1/v1/embeddings"
    # It defaults to the model embed-serve runs.
    assert endpoint.model == settings.embedding.embedding_model
    # Compose passes unset variables as empty strings: no URL, and no "Bearer " header.
    blank = Settings(
        database_url="postgresql+asyncpg://x/y",  # type: ignore[arg-type]
        embedding_http_url="",
        embedding_http_api_key="",  # type: ignore[arg-type]
    )
    assert (
        blank.embedding.embedding_http_url is None
        and blank.embedding.embedding_http_api_key is None
    )


def test_queries_follow_the_http_backend_unless_chosen(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COGNIS_DATABASE_URL", "postgresql+asyncpg://x/y")
    monkeypatch.setenv("COGNIS_EMBEDDING_BACKEND", "http")
    monkeypatch.setenv("COGNIS_EMBEDDING_HTTP_URL", "http://127.0.0.1:1/v1")
    assert Settings().embedding.query_embedding_backend == "http"  # type: ignore[call-arg]
    monkeypatch.setenv("COGNIS_QUERY_EMBEDDING_BACKEND", "same")
    assert Settings().embedding.query_embedding_backend == "same"  # type: ignore[call-arg]
    monkeypatch.setenv("COGNIS_EMBEDDING_BACKEND", "torch")
    monkeypatch.delenv("COGNIS_QUERY_EMBEDDING_BACKEND")
    assert Settings().embedding.query_embedding_backend != "http"  # type: ignore[call-arg]


def test_the_model_services_query_model_waits_for_no_companions_unless_set() -> None:
    settings = Settings(database_url="postgresql+asyncpg://x/y", embedding_batch_wait_ms=5.0)  # type: ignore[arg-type]
    memories = served_embedder(settings.embedding)
    queries = served_query_embedder(settings.embedding, memories)

    assert queries is not memories and queries.backend == "onnx-int8"
    assert (queries.batcher._max_wait_s, memories.batcher._max_wait_s) == (0.0, 0.005)
    # One forward pass per query: its vector does not depend on the queries beside it.
    assert (queries._forward_batch_size, memories._forward_batch_size) == (1, 8)
    chosen = Settings(
        database_url="postgresql+asyncpg://x/y",  # type: ignore[arg-type]
        query_embedding_batch_wait_ms=2.0,
    )
    assert served_query_embedder(chosen.embedding, memories).batcher._max_wait_s == 0.002


def test_embed_serve_refuses_to_forward_to_another_server() -> None:
    settings = Settings(
        database_url="postgresql+asyncpg://x/y",  # type: ignore[arg-type]
        embedding_backend="http",
        embedding_http_url="http://127.0.0.1:1/v1",
    )
    with pytest.raises(ValueError, match="computes embeddings itself"):
        served_embedder(settings.embedding)


@pytest.mark.services  # the run's embedding server, which no fixture names
def test_embed_serve_command_needs_no_database(model_path: str) -> None:
    """`python -m app embed-serve` as an embedder container runs it: no database settings. The
    run's embedding server is that command, started so (tests/services.py: EmbeddingServer)."""
    url = services.embedding_server_url()
    health = httpx.get(f"{url}/health", timeout=10).json()
    assert health["loaded"] is True and health["model"] == model_path
    # One string rather than a list, as OpenAI's API also accepts.
    response = httpx.post(
        f"{url}/v1/embeddings",
        json={"input": "Alice keeps bees.", "dimensions": COARSE_DIM},
        timeout=120,
    )

    assert response.status_code == 200, response.text
    body = response.json()
    assert body["object"] == "list" and body["model"] == model_path
    (item,) = body["data"]
    assert item["index"] == 0 and len(item["embedding"]) == COARSE_DIM
    assert np.linalg.norm(item["embedding"]) == pytest.approx(1.0, abs=1e-5)
