"""The one category rule (app/memories/categories.py) at the store's doors: REST create, batch,
PATCH and the list filter, the import, and the classifier's own choice, with a category the
deployment added to the `categories` table while the service runs."""

from __future__ import annotations

import json

import httpx
from sqlalchemy.ext.asyncio import AsyncEngine

from app.vocabulary import SEED_CATEGORIES
from tests.factories import create_memory, deployment_category
from tests.imports.helpers import imported_rows, jsonl, post_import

PET_EXAMPLES = (
    "I have a golden retriever called Max.",
    "My cat sleeps on my bed.",
    "I keep two rabbits in the garden.",
    "I take my dog to the vet every year.",
    "My parrot can say hello.",
    "I feed the goldfish twice a day.",
)


def _memories(user_id: str) -> str:
    return f"/v1/users/{user_id}/memories"


async def test_rest_accepts_a_deployments_category_and_names_it_when_refusing_another(
    client: httpx.AsyncClient, db: AsyncEngine, user_id: str
) -> None:
    async with deployment_category(db, client, user_id) as custom:
        created = await create_memory(client, user_id, "Noor keeps bees.", category=custom)
        assert created["category"] == custom
        batch = await client.post(
            f"{_memories(user_id)}/batch",
            json={"memories": [{"content": "Noor sells honey.", "category": custom}]},
        )
        assert batch.status_code == 201, batch.text
        assert batch.json()["items"][0]["category"] == custom
        listed = await client.get(_memories(user_id), params={"category": custom})
        assert {m["content"] for m in listed.json()["items"]} == {
            "Noor keeps bees.",
            "Noor sells honey.",
        }

        refused = [
            await client.post(_memories(user_id), json={"content": "x", "category": "astrology"}),
            await client.post(
                f"{_memories(user_id)}/batch",
                json={"memories": [{"content": "x"}, {"content": "y", "category": "astrology"}]},
            ),
            await client.patch(
                f"{_memories(user_id)}/{created['id']}", json={"category": "astrology"}
            ),
            await client.get(_memories(user_id), params={"category": "astrology"}),
        ]
        for response, field in zip(
            refused, ("category", "memories[1].category", "category", "category"), strict=True
        ):
            assert response.status_code == 400, response.text
            assert response.headers["content-type"].startswith("application/problem+json")
            problem = response.json()
            assert problem["field"] == field
            assert "unknown category 'astrology'" in problem["detail"]
            # The known ones are named: the seeds and the deployment's own.
            assert custom in problem["detail"] and "personal_details" in problem["detail"]
        history = await client.get(f"{_memories(user_id)}/{created['id']}/history")
        assert len(history.json()["versions"]) == 1


async def test_an_update_changes_the_category_only_when_asked(
    client: httpx.AsyncClient, db: AsyncEngine, user_id: str
) -> None:
    async with deployment_category(db, client, user_id) as custom:
        first = await create_memory(client, user_id, "I am vegan.", category=custom)
        # New content alone: the category stays (it used to be classified again, silently).
        reworded = await client.patch(
            f"{_memories(user_id)}/{first['id']}", json={"content": "I eat no animal products."}
        )
        assert reworded.status_code == 200, reworded.text
        assert reworded.json()["category"] == custom
        # An explicit null asks the classifier, and its choice is in the response.
        chosen = await client.patch(
            f"{_memories(user_id)}/{reworded.json()['id']}", json={"category": None}
        )
        assert chosen.status_code == 200, chosen.text
        assert chosen.json()["category"] == "dietary"
        moved = await client.patch(
            f"{_memories(user_id)}/{chosen.json()['id']}", json={"category": custom}
        )
        assert moved.status_code == 200, moved.text
        versions = (await client.get(f"{_memories(user_id)}/{first['id']}/history")).json()
        assert [v["category"] for v in versions["versions"]] == [custom, custom, "dietary", custom]


async def test_an_import_takes_a_deployments_category_and_fails_an_unknown_line(
    client: httpx.AsyncClient, db: AsyncEngine, user_id: str
) -> None:
    async with deployment_category(db, client, user_id) as custom:
        lines = [
            {"external_id": "own", "content": "Keeps bees on the roof", "category": custom},
            {"external_id": "bad", "content": "Reads the stars", "category": "astrology"},
            {"external_id": "seed", "content": "Speaks Portuguese", "category": "educational"},
        ]
        summary = await post_import(client, user_id, jsonl(lines))
        assert (summary["imported"], summary["failed"]) == (2, 1)
        (error,) = summary["errors"]
        assert (error["line"], error["field"]) == (2, "category")
        assert "unknown category 'astrology'" in error["detail"] and custom in error["detail"]
        assert set(await imported_rows(db, user_id)) == {"own", "seed"}
        listed = await client.get(_memories(user_id), params={"category": custom})
        assert [m["content"] for m in listed.json()["items"]] == ["Keeps bees on the roof"]


async def test_the_classifier_learns_a_deployments_category_without_a_restart(
    client: httpx.AsyncClient, db: AsyncEngine, user_id: str
) -> None:
    before = await create_memory(client, user_id, "Our puppy chewed my slippers again.")
    assert before["category"] in SEED_CATEGORIES
    async with deployment_category(db, client, user_id, examples=PET_EXAMPLES) as pets:
        # The first write naming the new row shows the process's copy of the list is out of
        # date: the classifier reads the table again and learns the row's examples.
        await create_memory(client, user_id, "Noor's cat is called Pixel.", category=pets)
        chosen = await create_memory(client, user_id, "Our puppy chewed my slippers again.")
        assert chosen["category"] == pets
    # The row is gone again: the classifier's choice is held to the table, not to its copy.
    other = f"{user_id}-after"
    after = await create_memory(client, other, "Our puppy chewed my slippers again.")
    assert after["category"] in SEED_CATEGORIES
    assert (await client.delete(f"/v1/users/{other}")).status_code == 200


async def test_the_openapi_document_describes_category_as_a_string_with_the_seeds_as_examples(
    client: httpx.AsyncClient,
) -> None:
    schema = (await client.get("/schema/openapi.json")).json()
    components = schema["components"]["schemas"]
    for struct in ("MemoryCreate", "MemoryUpdate"):
        category = components[struct]["properties"]["category"]
        variants = category.get("oneOf", [category])
        assert {"type": "string"} in variants or category.get("type") == "string"
        # Not an enum: the table, not this document, says which names exist.
        assert "enum" not in json.dumps(category)
        assert category["examples"] == list(SEED_CATEGORIES)
        assert "categories` table" in category["description"]
