"""Sentence vectors through the real API: what the store embeds for a memory of several
sentences (app/memories/sentences.py) on every write path, how the vector leg scores it
(lever sentence_vector) and the backfill command for memories written without them."""

from __future__ import annotations

import json

import numpy as np
from sqlalchemy import text

from app.memories.sentence_backfill import embed_missing_sentences
from app.ml.batching import Work, WorkClass
from tests.conftest import run_cli_async
from tests.factories import create_memory, search
from tests.imports.helpers import imported_rows, jsonl, post_import
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


async def embedded(inprocess_api, texts: list[str]) -> list[np.ndarray]:
    embedder = inprocess_api.app.state.runtime.embedder
    return [np.asarray(e.full) for e in await embedder.embed(texts, Work(WorkClass.INTERACTIVE))]


def assert_same_vectors(stored: list[np.ndarray] | None, expected: list[np.ndarray]) -> None:
    assert stored is not None and len(stored) == len(expected)
    for got, want in zip(stored, expected, strict=True):
        assert float(got @ want) > 0.999  # unit vectors: the same text, embedded


async def test_each_sentence_of_a_memory_is_embedded_as_its_speakers_line(
    client, db, inprocess_api, user_id
) -> None:
    long = await create_memory(client, user_id, LONG, speaker="Ann")
    short = await create_memory(client, user_id, "I drink green tea every morning.", speaker="Ann")
    assert_same_vectors(
        await stored_sentences(db, long["id"]), await embedded(inprocess_api, LONG_SENTENCES)
    )
    assert await stored_sentences(db, short["id"]) == []  # one sentence: the content's vector


async def test_a_new_version_keeps_or_renews_its_sentences_with_its_content(
    client, db, inprocess_api, user_id
) -> None:
    first = await create_memory(client, user_id, LONG, speaker="Ann")
    url = f"/v1/users/{user_id}/memories"
    second = (await client.patch(f"{url}/{first['id']}", json={"category": "hobbies"})).json()
    assert second["version"] == 2
    assert_same_vectors(
        await stored_sentences(db, second["id"]), await stored_sentences(db, first["id"]) or []
    )
    renewed = "I sold my pottery wheel last week. Now I paint landscapes on weekends."
    third = (await client.patch(f"{url}/{second['id']}", json={"content": renewed})).json()
    assert third["version"] == 3
    assert_same_vectors(
        await stored_sentences(db, third["id"]),
        await embedded(
            inprocess_api,
            ["Ann: I sold my pottery wheel last week.", "Ann: Now I paint landscapes on weekends."],
        ),
    )


async def test_an_import_stores_the_sentence_vectors_through_copy(
    client, db, inprocess_api, user_id
) -> None:
    lines = [
        {"external_id": "long", "content": LONG, "speaker": "Ann"},
        {"external_id": "short", "content": "I drink green tea every morning."},
    ]
    summary = await post_import(client, user_id, jsonl(lines))
    assert summary["imported"] == 2, summary
    rows = await imported_rows(db, user_id)
    assert_same_vectors(
        await stored_sentences(db, rows["long"]["id"]),
        await embedded(inprocess_api, LONG_SENTENCES),
    )
    assert await stored_sentences(db, rows["short"]["id"]) == []


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


async def test_the_backfill_embeds_what_was_written_without_and_only_that_users(
    client, db, inprocess_api, migrated, user_id, other_user_id
) -> None:
    mine = await create_memory(client, user_id, LONG, speaker="Ann")
    single = await create_memory(client, user_id, "I drink green tea every morning.")
    theirs = await create_memory(client, other_user_id, LONG, speaker="Ann")
    async with db.begin() as connection:  # as written before migration 0021
        await connection.execute(
            text("UPDATE memories SET sentence_embeddings_768d = NULL WHERE id = ANY(:ids)"),
            {"ids": [mine["id"], single["id"], theirs["id"]]},
        )
    result = await run_cli_async(migrated, "app", "embed-sentences", "--user", user_id)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "done: 2 memories, 2 sentence vectors" in result.stdout
    assert_same_vectors(
        await stored_sentences(db, mine["id"]), await embedded(inprocess_api, LONG_SENTENCES)
    )
    assert await stored_sentences(db, single["id"]) == []
    assert await stored_sentences(db, theirs["id"]) is None  # another user's: not touched
    # A rerun finds nothing left to do.
    runtime = inprocess_api.app.state.runtime
    again = await embed_missing_sentences(
        runtime.background_sessionmaker, runtime.embedder, user_id=user_id
    )
    assert (again.memories, again.sentences) == (0, 0)
