"""A search's query embedding starts before its speaker lookup (app/retrieval/early_embedding.py),
and the vector leg's own `embed_query` then awaits that request instead of sending another.

The model is a scripted OpenAI-compatible server on loopback (tests/ml/test_http_encoder.py)
that records what it is asked to embed: the requests it gets are what is asserted."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from app.config import Settings
from app.db.tenant import act_as
from app.ml.embedder import Embedder
from app.retrieval.early_embedding import EarlyEmbedding
from app.retrieval.legs import question_embedded
from app.retrieval.profiles import plan_search
from app.retrieval.request import SearchRequest
from app.retrieval.speakers import without_names
from app.retrieval.steps import SearchContext
from tests.ml.test_http_encoder import ScriptedServer, _endpoint, _ok

SETTINGS = Settings(database_url="postgresql+asyncpg://unused/unused")  # type: ignore[arg-type]


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    server = ScriptedServer([_ok])
    yield server
    server.close()


def _search(embedder: Embedder, user: str, query: str) -> tuple[SearchContext, str]:
    """A search's context (no stores: the early embedding reads none) and the text its vector
    leg embeds once the lookup has found the speaker Caroline."""
    request = SearchRequest(user_id=user, query=query, top_k=5)
    plan = plan_search(request, SETTINGS.retrieval)
    context = SearchContext(request, plan, None, None, None, embedder, None, None)  # type: ignore[arg-type]
    return context, question_embedded(plan, request, without_names(query, {"Caroline"}))


def _asked(server: ScriptedServer) -> list[str]:
    return [text for request in server.requests for text in request["input"]]


async def test_the_early_request_is_the_legs_once_the_users_speakers_are_known(
    server: ScriptedServer,
) -> None:
    embedder = Embedder(
        "m", backend="http", http_endpoint=_endpoint(server.url), query_cache_size=16
    )
    early = EarlyEmbedding()
    act_as(uuid.uuid4())

    # A user's first search names a speaker nobody has looked up yet: the early request
    # embeds the whole question, the leg its own text without the name (two requests).
    context, leg_text = _search(embedder, "u1", "What did Caroline paint last summer?")
    started = early.start(context)
    early.found(context, {"Caroline"})
    await embedder.embed_query(leg_text)
    assert started is not None and (await started).full[0] == 1.0
    assert sorted(_asked(server)) == sorted(["What did Caroline paint last summer?", leg_text])
    assert "Caroline" not in leg_text

    # Their next search: the early request is the leg's text, asked for before the lookup
    # answered; the leg then sends nothing of its own.
    context, leg_text = _search(embedder, "u1", "Where did Caroline go hiking?")
    started = early.start(context)
    assert started is not None
    await started
    assert _asked(server)[2:] == [leg_text]
    early.found(context, {"Caroline"})
    vector = await embedder.embed_query(leg_text)
    assert _asked(server)[2:] == [leg_text] and vector.full[0] == 1.0

    # Remembered per tenant and user: another user, or the same user id in another tenant,
    # starts from no speakers (the whole question, once: then cached), never from u1's.
    for tenant, user in ((None, "u2"), (uuid.uuid4(), "u1")):
        if tenant is not None:
            act_as(tenant)
        context, _ = _search(embedder, user, "Did Caroline like the museum?")
        await early.start(context)  # type: ignore[misc]
    assert _asked(server)[3:] == ["Did Caroline like the museum?"]


async def test_a_users_speakers_are_forgotten_after_their_last_search(
    server: ScriptedServer,
) -> None:
    embedder = Embedder("m", backend="http", http_endpoint=_endpoint(server.url))
    early = EarlyEmbedding(kept_s=0.0)
    act_as(uuid.uuid4())
    context, _ = _search(embedder, "u1", "What did Caroline paint?")
    early.found(context, {"Caroline"})

    await early.start(context)  # type: ignore[misc]

    assert _asked(server) == ["What did Caroline paint?"]  # the whole question: none known
    assert not early._speakers


async def test_concurrent_searches_of_one_text_share_a_request(server: ScriptedServer) -> None:
    embedder = Embedder(
        "m", backend="http", http_endpoint=_endpoint(server.url), query_cache_size=0
    )

    pending = embedder.start_query("where do I live?")
    first = await embedder.embed_query("where do I live?")
    assert (await pending) is first and _asked(server) == ["where do I live?"]
    # No cache: once answered, the same text is asked again.
    await embedder.embed_query("where do I live?")
    assert _asked(server) == ["where do I live?"] * 2
