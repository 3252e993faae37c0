"""Entities through the in-process API and the real stores: found by the NER model, linked to
memory versions, listed, paged, filtered, never another user's or tenant's, erased with the
user, and followed by the entity hop to a memory neither leg found."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest
from sqlalchemy import func, select, text

from app.db.models import Memory
from app.memories.entities import extract_missing_entities
from app.ml.ner import EntityRecognizer
from tests.factories import search
from tests.retrieval.test_pipeline_api import _load

pytestmark = pytest.mark.xdist_group("entities")

MEMORIES = [
    {"content": "Melanie took the kids swimming at Lake Tahoe last weekend"},
    {"content": "Mel signed up for a pottery class at the community center"},
    {"content": "Caroline joined a support group in Boston"},
    {"content": "I am allergic to peanuts"},
]


@pytest.fixture(scope="module")
def recognizer() -> EntityRecognizer:
    return EntityRecognizer()


async def _extract(inprocess_api, recognizer, user_id: str) -> None:
    """Every current memory of the user read for entities. The session's API process runs an
    entity worker on the same database: a row it is storing is skipped here (SKIP LOCKED), so
    read again until none of the user's is left unread (it commits within a batch)."""
    runtime = inprocess_api.app.state.runtime
    deadline = asyncio.get_running_loop().time() + 60
    while True:
        await extract_missing_entities(runtime.background_sessionmaker, recognizer, user_id=user_id)
        async with runtime.background_sessionmaker() as session:
            unread = await session.scalar(
                select(func.count())
                .select_from(Memory)
                .where(Memory.user_id == user_id, Memory.is_current, Memory.entities_at.is_(None))
            )
        if not unread or asyncio.get_running_loop().time() > deadline:
            return
        await asyncio.sleep(0.2)


async def _entities(client, user_id: str, **params) -> dict:
    response = await client.get(f"/v1/users/{user_id}/entities", params=params)
    assert response.status_code == 200, response.text
    return response.json()


@pytest.fixture
async def loaded(client, opensearch, index_name, inprocess_api, recognizer, user_id, other_user_id):
    created = await _load(client, opensearch, index_name, user_id, MEMORIES)
    await _load(
        client,
        opensearch,
        index_name,
        other_user_id,
        [{"content": "Melanie moved to Paris with Jon"}],
    )
    await _extract(inprocess_api, recognizer, user_id)
    await _extract(inprocess_api, recognizer, other_user_id)
    return created


async def test_entities_are_listed_with_types_aliases_and_counts(client, user_id, loaded) -> None:
    listed = await _entities(client, user_id)
    by_name = {e["name"]: e for e in listed["items"]}
    melanie = by_name["Melanie"]
    assert (melanie["type"], melanie["aliases"], melanie["memories"]) == ("person", ["Mel"], 2)
    assert by_name["Lake Tahoe"]["type"] == "place"
    assert by_name["Boston"]["type"] == "place"
    assert "Paris" not in by_name and "Jon" not in by_name  # the other user's
    assert [e["name"].lower() for e in listed["items"]] == sorted(
        by_name_lower := [e["name"].lower() for e in listed["items"]]
    ) and by_name_lower
    places = await _entities(client, user_id, type="place")
    assert {e["name"] for e in places["items"]} == {"Lake Tahoe", "Boston"}
    named = await _entities(client, user_id, name="mel")
    assert [e["id"] for e in named["items"]] == [melanie["id"]]


async def test_pages_follow_the_cursor_and_a_bad_cursor_is_a_400(client, user_id, loaded) -> None:
    everything = await _entities(client, user_id)
    seen, cursor = [], None
    while True:
        page = await _entities(client, user_id, limit=1, **({"cursor": cursor} if cursor else {}))
        seen += [e["id"] for e in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == [e["id"] for e in everything["items"]]
    bad = await client.get(f"/v1/users/{user_id}/entities", params={"cursor": "nope!"})
    assert bad.status_code == 400
    assert bad.headers["content-type"].startswith("application/problem+json")
    wrong_type = await client.get(f"/v1/users/{user_id}/entities", params={"type": "planet"})
    assert wrong_type.status_code == 400
    nul = await client.get(f"/v1/users/{user_id}/entities", params={"name": "Me\x00l"})
    assert nul.status_code == 400 and "NUL" in nul.json()["detail"]


async def test_an_entitys_memories_and_no_one_elses(client, user_id, other_user_id, loaded):
    melanie = (await _entities(client, user_id, name="Melanie"))["items"][0]
    response = await client.get(f"/v1/users/{user_id}/entities/{melanie['id']}/memories")
    assert response.status_code == 200, response.text
    contents = {m["content"] for m in response.json()["memories"]}
    assert contents == {MEMORIES[0]["content"], MEMORIES[1]["content"]}
    assert response.json()["entity"]["memories"] == 2
    one = await client.get(
        f"/v1/users/{user_id}/entities/{melanie['id']}/memories", params={"limit": 1}
    )
    assert len(one.json()["memories"]) == 1
    assert one.json()["entity"]["memories"] == 2  # the count, not the page
    # Another user's path to this entity, and an id nobody has: the same 404.
    for owner, entity_id in ((other_user_id, melanie["id"]), (user_id, str(uuid.uuid4()))):
        missing = await client.get(f"/v1/users/{owner}/entities/{entity_id}/memories")
        assert missing.status_code == 404, missing.text
    other = await _entities(client, other_user_id)
    assert {e["name"] for e in other["items"]} >= {"Melanie", "Paris"}
    assert melanie["id"] not in {e["id"] for e in other["items"]}


async def test_a_japanese_memory_yields_its_person_and_place(
    client, opensearch, index_name, inprocess_api, recognizer, user_id
) -> None:
    """A memory detected as Japanese is read by the Japanese model (GiNZA): its person and its
    place become entities, searchable by name, and an English memory beside it keeps the
    English model."""
    created = await _load(
        client,
        opensearch,
        index_name,
        user_id,
        [
            {"content": "鈴木さんと一緒に金沢へ旅行しました。"},
            {"content": "Kevin hiked in Yosemite with his brother"},
        ],
    )
    assert created[0]["language"] == "ja"
    await _extract(inprocess_api, recognizer, user_id)
    by_name = {e["name"]: e for e in (await _entities(client, user_id))["items"]}
    assert by_name["鈴木"]["type"] == "person"  # the honorific さん is not part of the name
    assert by_name["金沢"]["type"] == "place"
    assert by_name["Kevin"]["type"] == "person"
    response = await client.get(f"/v1/users/{user_id}/entities/{by_name['金沢']['id']}/memories")
    assert [m["id"] for m in response.json()["memories"]] == [created[0]["id"]]
    # No relevance floor: the filter alone decides which of the two memories come back.
    entity = {"field": "entity", "op": "eq", "value": "鈴木"}
    filtered = await search(client, user_id, "鈴木さんとの旅行", filters=entity, min_relevance=0)
    assert [r["memory"]["id"] for r in filtered["results"]] == [created[0]["id"]]


async def test_search_filters_by_entity_name_or_alias(client, user_id, loaded) -> None:
    for value in ("Mel", "melanie"):
        found = await search(
            client,
            user_id,
            "what does she do in her free time?",
            filters={"field": "entity", "op": "eq", "value": value},
            # Under the default relevance floor: "she" here is Melanie, and lever first_person
            # leaves a search filtered to her in the third person (read as the user's own,
            # "what does I do...", one of her memories fell under the floor).
        )
        contents = {hit["memory"]["content"] for hit in found["results"]}
        assert contents == {MEMORIES[0]["content"], MEMORIES[1]["content"]}
    others = await search(
        client,
        user_id,
        "what does she do in her free time?",
        filters={"field": "entity", "op": "nin", "value": ["Melanie", "Boston"]},
        min_relevance=0,  # the one memory left is far from the question
    )
    assert {hit["memory"]["content"] for hit in others["results"]} == {MEMORIES[3]["content"]}
    listed = await client.get(
        f"/v1/users/{user_id}/memories",
        params={"filters": json.dumps({"field": "entity", "op": "eq", "value": "Boston"})},
    )
    assert [m["content"] for m in listed.json()["items"]] == [MEMORIES[2]["content"]]


async def test_another_tenant_sees_none_of_the_entities(migrated, db, user_id, loaded) -> None:
    from sqlalchemy.ext.asyncio import create_async_engine

    app_role = create_async_engine(migrated["COGNIS_DATABASE_URL"])
    try:
        async with app_role.begin() as connection:
            await connection.execute(
                text("SELECT set_config('cognis.tenant_id', :t, true)"), {"t": str(uuid.uuid4())}
            )
            for table in ("entities", "memory_entities"):
                count = await connection.scalar(
                    text(f"SELECT count(*) FROM {table} WHERE user_id = :u"),  # noqa: S608
                    {"u": user_id},
                )
                assert count == 0, table
    finally:
        await app_role.dispose()
    async with db.connect() as connection:  # the default tenant: the user's own rows
        assert (
            await connection.scalar(
                text("SELECT count(*) FROM memory_entities WHERE user_id = :u"), {"u": user_id}
            )
            >= 4
        )


async def test_entities_are_erased_with_the_user(client, db, user_id, other_user_id, loaded):
    erased = await client.delete(f"/v1/users/{user_id}")
    assert erased.status_code == 200, erased.text
    assert erased.json()["postgres"]["entities"] >= 3
    async with db.connect() as connection:
        for table in ("entities", "memory_entities"):
            for owner, left in ((user_id, 0), (other_user_id, None)):
                count = await connection.scalar(
                    text(f"SELECT count(*) FROM {table} WHERE user_id = :u"),  # noqa: S608
                    {"u": owner},
                )
                assert count == left if left is not None else count > 0, (table, owner)
    assert (await _entities(client, user_id))["items"] == []


async def test_the_entity_hop_brings_in_a_memory_neither_leg_found(
    client, opensearch, index_name, inprocess_api, recognizer, user_id
) -> None:
    """60 memories: the legs keep 50 each, all of them about Gina's baking; the one about the
    snowstorm in Denver shares no word with the question and is the farthest from it, but
    names Denver as the best hit does. Gina, named by every memory, links nothing."""
    target = "The snowstorm in Denver closed every road for three days"
    fillers = [
        {"content": f"Gina baked sourdough loaf number {i} in her bakery for the neighbours"}
        for i in range(58)
    ]
    await _load(
        client,
        opensearch,
        index_name,
        user_id,
        [{"content": "Gina opened her bakery in Denver"}, *fillers, {"content": target}],
    )
    await _extract(inprocess_api, recognizer, user_id)
    question = "Where did Gina open her bakery?"
    without = await search(client, user_id, question, top_k=60, min_relevance=0)
    assert target not in {h["memory"]["content"] for h in without["results"]}
    found = await search(
        client, user_id, question, top_k=60, min_relevance=0, levers={"entity_hop": True}
    )
    hits = {h["memory"]["content"]: h for h in found["results"]}
    assert found["results"][0]["memory"]["content"] == "Gina opened her bakery in Denver"
    assert target in hits
    stages = hits[target]["explanation"]
    # Its first stage is the hop: no leg ranked it, fusion never saw it.
    assert next(iter(stages)) == "entity_hop"
    assert found["stages"]["entity_hop"] == "1 joined via 1 entities"
    assert "entity_hop" not in without["stages"]
