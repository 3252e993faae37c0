"""Sentence vectors through the real API: what the background embeds for a memory of several
sentences (app/memories/sentences.py, app/memories/sentence_backfill.py), when the worker
runs, how the vector leg scores a memory by them (lever sentence_vector) and the command that
embeds what is pending."""

from __future__ import annotations

import asyncio
import json

import numpy as np
import pytest
from sqlalchemy import text

from app.ingest.sentence_worker import SentenceWorker
from app.memories.sentence_backfill import embed_missing_sentences, pending_sentences
from app.ml.scheduling.work import Work, WorkClass
from tests.conftest import run_cli_async
from tests.factories import create_memory, search
from tests.retrieval.test_pipeline_api import _load

LONG = (
    "Thanks for asking! I just signed up for a pottery class yesterday. "
    "The kids loved the dinosaur exhibit at the museum."
)
LONG_SENTENCES = [
    "Ann: Thanks for asking! I just signed up for a pottery class yesterday.",
    "Ann: The kids loved the dinosaur exhibit at the museum.",
]


async def stored_sentences(db, memory_id: str) -> list[np.ndarray] | None:
    async with db.connect() as connection:
        value = (
            await connection.execute(
                text("SELECT CAST(sentence_embeddings_768d AS text[]) FROM memories WHERE id = :i"),
                {"i": memory_id},
            )
        ).scalar_one()
    return None if value is None else [np.array(json.loads(v)) for v in value]


@pytest.fixture(autouse=True)
def background_only(request, inprocess_api, monkeypatch, backfill_alone):
    """The background's tests: writes leave every sentence to it, as a large batch's do
    (COGNIS_SENTENCE_VECTORS_AT_WRITE 0). The write path's own tests (`at_write`) run with
    sentence vectors on, as a server does (the test processes turn them off: their worker
    would embed the whole database's backlog beside every test). The backfills here are
    the tests' alone: no other process's entity worker locks a row they would skip."""
    retrieval = inprocess_api.app.state.runtime.settings.retrieval
    if "at_write" in request.node.name:
        monkeypatch.setattr(retrieval, "sentence_vectors", True)
    else:
        monkeypatch.setattr(retrieval, "sentence_vectors_at_write", 0)


async def embedded(inprocess_api, texts: list[str]) -> list[np.ndarray]:
    embedder = inprocess_api.app.state.runtime.embedder
    return [np.asarray(e.full) for e in await embedder.embed(texts, Work(WorkClass.INTERACTIVE))]


async def embed_pending(inprocess_api, user_id: str) -> None:
    """What the worker does when the model is idle, for this user's memories at once."""
    runtime = inprocess_api.app.state.runtime
    await embed_missing_sentences(runtime.background_sessionmaker, runtime.embedder, user_id)


def assert_same_vectors(stored: list[np.ndarray] | None, expected: list[np.ndarray]) -> None:
    assert stored is not None and len(stored) == len(expected)
    for got, want in zip(stored, expected, strict=True):
        assert float(got @ want) > 0.999  # unit vectors: the same text, embedded


async def test_a_small_write_embeds_its_sentences_at_write_in_its_own_call(
    client, db, inprocess_api, user_id
) -> None:
    """Within COGNIS_SENTENCE_VECTORS_AT_WRITE, a write is searchable by its sentences at
    once: nothing is left pending for the background, and the vectors are the background's."""
    runtime = inprocess_api.app.state.runtime
    limit = runtime.settings.retrieval.sentence_vectors_at_write
    assert limit >= len(LONG_SENTENCES)
    long = await create_memory(client, user_id, LONG, speaker="Ann")
    short = await create_memory(client, user_id, "I drink green tea every morning.", speaker="Ann")
    expected = await embedded(inprocess_api, LONG_SENTENCES)
    assert_same_vectors(await stored_sentences(db, long["id"]), expected)
    assert await stored_sentences(db, short["id"]) == []  # one sentence: the content's vector
    renewed = "I sold my pottery wheel last week. Now I paint landscapes on weekends."
    url = f"/v1/users/{user_id}/memories/{long['id']}"
    patched = (await client.patch(url, json={"content": renewed})).json()
    assert_same_vectors(
        await stored_sentences(db, patched["version_id"]),
        await embedded(
            inprocess_api,
            ["Ann: I sold my pottery wheel last week.", "Ann: Now I paint landscapes on weekends."],
        ),
    )
    report = await embed_missing_sentences(
        runtime.background_sessionmaker, runtime.embedder, user_id
    )
    assert (report.memories, report.sentences) == (0, 0)


async def test_a_batch_past_the_limit_leaves_its_sentences_to_the_background_not_at_write(
    client, db, inprocess_api, user_id, monkeypatch
) -> None:
    """A batch of more sentences than COGNIS_SENTENCE_VECTORS_AT_WRITE costs its write the
    content's vectors only (bulk throughput), whole: not some of its memories either."""
    retrieval = inprocess_api.app.state.runtime.settings.retrieval
    memories = [
        {"content": f"{LONG} We are going back there next month."},
        {
            "content": "I sold my pottery wheel last week. Now I paint landscapes every "
            "weekend. It is much calmer for me."
        },
        {
            "content": "My pottery teacher moved to Leeds in May. The class has a new teacher "
            "now. She is very kind to everyone."
        },
    ]
    per_memory = 3
    monkeypatch.setattr(retrieval, "sentence_vectors_at_write", per_memory * len(memories) - 1)
    response = await client.post(f"/v1/users/{user_id}/memories/batch", json={"memories": memories})
    assert response.status_code == 201, response.text
    for item in response.json()["items"]:
        assert await stored_sentences(db, item["id"]) is None
    # A search meanwhile says it ranked them without their sentences.
    body = {"profile": "default", "top_k": 5, "levers": {"sentence_vector": True}}
    before = await search(client, user_id, "pottery class", **body)
    assert before["sentences_pending"] == len(before["results"]) > 1
    await embed_pending(inprocess_api, user_id)
    for item in response.json()["items"]:
        assert len(await stored_sentences(db, item["id"]) or []) == per_memory
    after = await search(client, user_id, "pottery class", **body)
    assert after["sentences_pending"] == 0 and len(after["results"]) == len(before["results"])


async def test_each_sentence_is_embedded_after_the_write_as_its_speakers_line(
    client, db, inprocess_api, user_id
) -> None:
    long = await create_memory(client, user_id, LONG, speaker="Ann")
    short = await create_memory(client, user_id, "I drink green tea every morning.", speaker="Ann")
    # The write embeds the content only: its sentences wait for the idle model.
    assert await stored_sentences(db, long["id"]) is None
    await embed_pending(inprocess_api, user_id)
    expected = await embedded(inprocess_api, LONG_SENTENCES)
    assert_same_vectors(await stored_sentences(db, long["id"]), expected)
    assert await stored_sentences(db, short["id"]) == []  # one sentence: the content's vector


async def test_a_new_version_keeps_or_renews_its_sentences_with_its_content(
    client, db, inprocess_api, user_id
) -> None:
    first = await create_memory(client, user_id, LONG, speaker="Ann")
    await embed_pending(inprocess_api, user_id)
    url = f"/v1/users/{user_id}/memories"
    second = (await client.patch(f"{url}/{first['id']}", json={"category": "hobbies"})).json()
    assert second["version"] == 2
    assert_same_vectors(
        await stored_sentences(db, second["version_id"]),
        await stored_sentences(db, first["version_id"]) or [],
    )
    renewed = "I sold my pottery wheel last week. Now I paint landscapes on weekends."
    third = (await client.patch(f"{url}/{second['id']}", json={"content": renewed})).json()
    assert third["version"] == 3
    assert await stored_sentences(db, third["version_id"]) is None  # new: pending again
    await embed_pending(inprocess_api, user_id)
    assert_same_vectors(
        await stored_sentences(db, third["version_id"]),
        await embedded(
            inprocess_api,
            ["Ann: I sold my pottery wheel last week.", "Ann: Now I paint landscapes on weekends."],
        ),
    )


async def test_a_memory_a_write_holds_is_left_for_a_later_batch_not_waited_for(
    client, db, inprocess_api, user_id
) -> None:
    held = await create_memory(client, user_id, LONG, speaker="Ann")
    free = await create_memory(client, user_id, LONG, speaker="Bob")
    async with db.connect() as writer, writer.begin():
        # A write of the user's (a PATCH, a delete of many) holds the row until it commits.
        await writer.execute(
            text("SELECT 1 FROM memories WHERE id = :i FOR UPDATE"), {"i": held["id"]}
        )
        # Waiting for the row would outlast this bound by far: the writer never commits
        # while the backfill runs.
        await asyncio.wait_for(embed_pending(inprocess_api, user_id), timeout=60)
        assert await stored_sentences(db, held["id"]) is None
        assert await stored_sentences(db, free["id"]) is not None
    await embed_pending(inprocess_api, user_id)
    expected = await embedded(inprocess_api, LONG_SENTENCES)
    assert_same_vectors(await stored_sentences(db, held["id"]), expected)


async def test_the_worker_embeds_only_while_the_model_is_idle(
    client, db, inprocess_api, user_id
) -> None:
    runtime = inprocess_api.app.state.runtime
    await create_memory(client, user_id, LONG, speaker="Ann")  # at least one pending

    async def pending() -> int:
        async with runtime.background_sessionmaker() as session:
            return await pending_sentences(session)

    await runtime.embedder.embed(["a write's text"], Work(WorkClass.INTERACTIVE))
    busy = SentenceWorker(runtime.background_sessionmaker, runtime.embedder, idle_s=3600)
    before = await pending()
    assert not busy.model_idle()
    assert (await busy.run_once()).memories == 0
    assert await pending() == before
    seen = runtime.embedder.batcher.foreground_seen_at
    idle = SentenceWorker(runtime.background_sessionmaker, runtime.embedder, idle_s=0, batch_size=1)
    assert (await idle.run_once()).memories == 1
    assert await pending() == before - 1
    # Its own work does not count as the model being busy.
    assert runtime.embedder.batcher.foreground_seen_at == seen


async def test_the_vector_leg_scores_a_memory_by_its_nearest_sentence(
    client, db, opensearch, index_name, inprocess_api, user_id
) -> None:
    (long,) = await _load(
        client, opensearch, index_name, user_id, [{"content": LONG, "speaker": "Ann"}]
    )
    await _load(
        client,
        opensearch,
        index_name,
        user_id,
        [{"content": "We talked about the weather and our plans for the summer holidays."}],
    )
    await embed_pending(inprocess_api, user_id)
    query = "dinosaur exhibit at the museum"
    vector = (await inprocess_api.app.state.runtime.query_embedder.embed_query(query)).full
    sentences = await stored_sentences(db, long["id"]) or []
    nearest = max(float(s @ vector) for s in sentences)
    body = {"profile": "paper", "stages": {"bm25": False}, "top_k": 5}
    plain = await search(client, user_id, query, **body)
    lifted = await search(client, user_id, query, levers={"sentence_vector": True}, **body)
    by_id = {
        name: {r["memory"]["id"]: r for r in found["results"]}
        for name, found in (("plain", plain), ("lifted", lifted))
    }
    content_score = by_id["plain"][long["id"]]["explanation"]["768d"]["score"]
    sentence_score = by_id["lifted"][long["id"]]["explanation"]["768d"]["score"]
    assert abs(sentence_score - nearest) < 1e-4
    assert sentence_score > content_score + 0.05
    # Relevance stays the content's (and context's) cosine: the floor means what it meant.
    assert by_id["lifted"][long["id"]]["relevance"] == by_id["plain"][long["id"]]["relevance"]
    assert abs(by_id["plain"][long["id"]]["relevance"] - round(content_score, 4)) < 1e-3


async def test_the_command_embeds_what_is_pending_and_only_that_users(
    client, db, inprocess_api, migrated, user_id, other_user_id
) -> None:
    mine = await create_memory(client, user_id, LONG, speaker="Ann")
    single = await create_memory(client, user_id, "I drink green tea every morning.")
    theirs = await create_memory(client, other_user_id, LONG, speaker="Ann")
    result = await run_cli_async(migrated, "app", "embed-sentences", "--user", user_id)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "done: 2 memories, 2 sentence vectors" in result.stdout
    expected = await embedded(inprocess_api, LONG_SENTENCES)
    assert_same_vectors(await stored_sentences(db, mine["id"]), expected)
    assert await stored_sentences(db, single["id"]) == []
    assert await stored_sentences(db, theirs["id"]) is None  # another user's: not touched
    # A rerun finds nothing left to do.
    runtime = inprocess_api.app.state.runtime
    again = await embed_missing_sentences(
        runtime.background_sessionmaker, runtime.embedder, user_id=user_id
    )
    assert (again.memories, again.sentences) == (0, 0)
