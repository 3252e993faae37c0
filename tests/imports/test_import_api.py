"""POST /v1/users/{id}/import against the real API, Postgres and OpenSearch."""

from __future__ import annotations

import asyncio
import json

import numpy as np
from sqlalchemy import text

from app.ml.embedder import matryoshka
from app.vocabulary import SEED_CATEGORIES
from tests.conftest import wait_until
from tests.factories import create_memory, search, stage_rank
from tests.imports.helpers import (
    BOM,
    JSON,
    NDJSON,
    chunked,
    deeply_nested,
    history,
    imported_rows,
    jsonl,
    mem0_record,
    post_import,
    random_vector,
)


async def test_jsonl_import_then_rerun_skips_everything(client, db, user_id) -> None:
    lines = [
        *history(3),
        {
            "external_id": "ctx-1",
            "content": "In this chat I want short answers",
            "scope": "CONTEXT",
            "session_id": "s-9",
            "speaker": "user",
            "event_time": "2024-03-01T12:00:00+01:00",
            "metadata": {"source": "old-app"},
        },
    ]
    # Streamed in pieces that split lines: the server reads it as it comes.
    summary = await post_import(client, user_id, chunked(jsonl(lines), 37))
    assert summary == {"imported": 4, "skipped": 0, "failed": 0, "errors": []}

    rows = await imported_rows(db, user_id)
    assert set(rows) == {"h-0", "h-1", "h-2", "ctx-1"}
    assert all(r["has_event"] and r["version"] == 1 and r["is_current"] for r in rows.values())
    context = rows["ctx-1"]
    assert (context["scope"], context["session_id"], context["speaker"]) == (
        "CONTEXT",
        "s-9",
        "user",
    )
    assert context["event_time"].isoformat() == "2024-03-01T11:00:00+00:00"
    assert context["metadata"] == {"source": "old-app"}
    # No category given: classified as POST /memories does, into one of the 15.
    assert context["category"] in SEED_CATEGORIES
    listed = (await client.get(f"/v1/users/{user_id}/memories", params={"limit": 10})).json()
    assert {m["external_id"] for m in listed["items"]} == set(rows)

    again = await post_import(client, user_id, jsonl(lines))
    assert again == {"imported": 0, "skipped": 4, "failed": 0, "errors": []}
    assert len(await imported_rows(db, user_id)) == 4


async def test_an_interrupted_import_resumes_with_the_rest(client, db, user_id) -> None:
    lines = history(10)
    first = await post_import(client, user_id, jsonl(lines[:4]), batch_size=3)
    assert first["imported"] == 4
    whole = await post_import(client, user_id, jsonl(lines), batch_size=3)
    assert (whole["imported"], whole["skipped"], whole["failed"]) == (6, 4, 0)
    rows = await imported_rows(db, user_id)
    assert set(rows) == {f"h-{i}" for i in range(10)}
    # A repeated external id within one file is imported once.
    repeated = await post_import(client, user_id, jsonl(history(2, prefix="r") * 2))
    assert (repeated["imported"], repeated["skipped"]) == (2, 2)


async def test_precomputed_vectors_are_stored_normalised_with_their_prefix(
    client, db, user_id
) -> None:
    given = random_vector(1)
    await post_import(
        client, user_id, jsonl([{**history(1)[0], "external_id": "v", "embedding": given}])
    )
    async with db.connect() as connection:
        full, coarse = (
            await connection.execute(
                text(
                    "SELECT CAST(embedding_768d AS real[]), CAST(embedding_256d AS real[])"
                    " FROM memories WHERE user_id = :u AND external_id = 'v'"
                ),
                {"u": user_id},
            )
        ).one()
    full, coarse = np.asarray(full, dtype=np.float32), np.asarray(coarse, dtype=np.float32)
    (expected,) = matryoshka(np.asarray([given]))
    assert np.array_equal(full, expected.full)
    assert np.array_equal(coarse, expected.coarse)
    assert abs(float(np.linalg.norm(full)) - 1) < 1e-5
    prefix = np.asarray(given[:256]) / np.linalg.norm(given[:256])
    assert np.allclose(coarse, prefix, atol=1e-6)


async def test_bad_lines_are_reported_while_good_lines_land(client, db, user_id) -> None:
    good = history(2)
    lines: list = [
        good[0],
        "{this is not json",
        {"external_id": "no-content"},
        {"external_id": "cat", "content": "x", "category": "astrology"},
        {"external_id": "vec", "content": "x", "category": "travel", "embedding": [0.1] * 100},
        {"external_id": "ctx", "content": "x", "category": "travel", "scope": "CONTEXT"},
        good[1],
    ]
    summary = await post_import(client, user_id, jsonl(lines))
    assert (summary["imported"], summary["skipped"], summary["failed"]) == (2, 0, 5)
    by_line = {e["line"]: e for e in summary["errors"]}
    assert set(by_line) == {2, 3, 4, 5, 6}
    assert by_line[2]["field"] is None and "JSON" in by_line[2]["detail"]
    assert by_line[3]["field"] == "content"
    assert by_line[4]["field"] == "category" and "astrology" in by_line[4]["detail"]
    assert by_line[5]["field"] == "embedding" and "100" in by_line[5]["detail"]
    assert by_line[6]["field"] == "session_id"
    assert set(await imported_rows(db, user_id)) == {"h-0", "h-1"}


async def test_unstorable_text_fails_its_line_only(client, db, user_id) -> None:
    """Issue 42, item 7: a NUL in a category failed the whole import with a 500. Like any other
    invalid line it is now that line's error, whatever field holds it, and the rest land."""
    good = history(2)
    nul = "a\x00b"
    lines: list = [
        good[0],
        {"external_id": "cat", "content": "x", "category": nul},
        {"external_id": "meta", "content": "x", "category": "travel", "metadata": {nul: 1}},
        {"external_id": nul, "content": "x", "category": "travel"},
        {"external_id": "agent", "content": "x", "category": "travel", "agent_id": nul},
        # A lone surrogate, as JSON's \ud800 escape.
        '{"external_id": "sur", "content": "x\\ud800", "category": "travel"}',
        good[1],
    ]
    summary = await post_import(client, user_id, jsonl(lines))
    assert (summary["imported"], summary["skipped"], summary["failed"]) == (2, 0, 5)
    by_line = {e["line"]: e for e in summary["errors"]}
    assert {n: by_line[n]["field"] for n in (2, 3, 4, 5)} == {
        2: "category",
        3: "metadata",
        4: "external_id",
        5: "agent_id",
    }
    assert all("NUL character" in by_line[n]["detail"] for n in (2, 3, 4, 5))
    assert by_line[6]["field"] == "content" and "surrogate" in by_line[6]["detail"]
    assert set(await imported_rows(db, user_id)) == {"h-0", "h-1"}


async def test_imported_memories_become_searchable_through_bm25(client, db, user_id) -> None:
    lines = [
        *history(5),
        {"external_id": "rare", "content": "My grandmother played the hurdy-gurdy"},
    ]
    await post_import(client, user_id, jsonl(lines))
    rows = await imported_rows(db, user_id)
    assert all(r["has_event"] for r in rows.values())

    async def found_by_bm25():
        result = await search(client, user_id, "hurdy-gurdy", top_k=3)
        hits = [h for h in result["results"] if stage_rank(h, "bm25") == 1]
        return hits if hits else None

    (hit,) = await wait_until(found_by_bm25, timeout=60)
    assert hit["memory"]["id"] == str(rows["rare"]["id"])
    async with db.connect() as connection:
        pending = (
            await connection.execute(
                text("SELECT count(*) FROM outbox WHERE user_id = :u AND processed_at IS NULL"),
                {"u": user_id},
            )
        ).scalar_one()
    assert pending == 0


async def test_another_users_data_is_untouched(client, db, user_id, other_user_id) -> None:
    theirs = await create_memory(client, other_user_id, "Imported fact number 0", category="travel")
    lines = [
        history(1)[0],
        {"external_id": "h-0", "content": "Not mine to write", "user_id": other_user_id},
    ]
    summary = await post_import(client, user_id, jsonl(lines))
    assert (summary["imported"], summary["failed"]) == (1, 1)
    assert summary["errors"][0]["field"] == "user_id"
    # The same external id for another user is another memory.
    await post_import(client, other_user_id, jsonl(history(1)))
    others = await imported_rows(db, other_user_id)
    assert set(others) == {None, "h-0"}
    assert str(others[None]["id"]) == theirs["id"]
    assert set(await imported_rows(db, user_id)) == {"h-0"}


async def test_the_endpoint_wants_json_lines_and_a_key(client, user_id) -> None:
    wrong_type = await client.post(
        f"/v1/users/{user_id}/import", content=b"{}", headers={"Content-Type": "text/csv"}
    )
    assert wrong_type.status_code == 415
    no_key = await client.post(
        f"/v1/users/{user_id}/import",
        content=jsonl(history(1)),
        headers={**NDJSON, "X-API-Key": "nope"},
    )
    assert no_key.status_code == 401
    schema = (await client.get("/schema/openapi.json")).json()
    operation = schema["paths"]["/v1/users/{user_id}/import"]["post"]
    assert "application/x-ndjson" in operation["requestBody"]["content"]
    assert {"imported", "skipped", "failed", "errors"} <= set(
        schema["components"]["schemas"]["ImportSummaryOut"]["properties"]
    )


async def test_a_body_of_any_size_is_read_line_by_line(client, db, user_id) -> None:
    """Over Litestar's default 10 MB body limit; oversized lines are dropped unread."""
    oversized = "x" * (300 * 1024)
    body = jsonl([*[oversized] * 40, *history(1)])
    assert len(body) > 11_000_000
    summary = await post_import(client, user_id, chunked(body, 1 << 16))
    assert (summary["imported"], summary["failed"]) == (1, 40)
    assert summary["errors"][0]["line"] == 1
    assert "at most 262144" in summary["errors"][0]["detail"]
    assert set(await imported_rows(db, user_id)) == {"h-0"}


async def test_a_line_nested_too_deeply_fails_alone(client, db, user_id) -> None:
    """As POST /memories answers such metadata with a 400, the import fails that line only."""
    deep = deeply_nested()
    single = await client.post(
        f"/v1/users/{user_id}/memories",
        content=f'{{"content": "x", "metadata": {deep}}}',
        headers=JSON,
    )
    assert single.status_code == 400, single.text
    good = history(2)
    deep_line = f'{{"external_id": "deep", "content": "x", "metadata": {deep}}}'
    summary = await post_import(client, user_id, jsonl([good[0], deep_line, good[1]]))
    assert (summary["imported"], summary["failed"]) == (2, 1)
    (error,) = summary["errors"]
    assert error["line"] == 2 and "nested too deeply" in error["detail"]
    assert set(await imported_rows(db, user_id)) == {"h-0", "h-1"}


async def test_an_import_under_way_when_its_user_is_erased_is_refused_and_leaves_nothing(
    client, db, user_id
) -> None:
    """An import that began before the erase: its next batch is refused (409 problem+json, as
    every write of that user in flight during an erase is) and what it committed before went
    with the user. An import sent after the erase is accepted at once."""
    lines = history(6)
    erased = asyncio.Event()

    async def body():
        yield jsonl(lines[:2])  # a first batch, written before the erase
        await erased.wait()
        yield jsonl(lines[2:])

    under_way = asyncio.create_task(
        client.post(
            f"/v1/users/{user_id}/import",
            content=body(),
            headers=NDJSON,
            params={"batch_size": 2},
        )
    )

    async def first_batch_written() -> bool:
        return len(await imported_rows(db, user_id)) == 2

    await wait_until(first_batch_written, timeout=60)
    erase = await client.delete(f"/v1/users/{user_id}")
    assert erase.status_code == 200, erase.text
    assert erase.json()["postgres"]["memories"] == 2
    erased.set()
    response = await under_way
    assert response.status_code == 409, response.text
    assert response.headers["Content-Type"].startswith("application/problem+json")
    assert response.json()["title"] == "User erased"
    assert "after this write began" in response.json()["detail"]
    assert await imported_rows(db, user_id) == {}

    summary = await post_import(client, user_id, jsonl(lines))
    assert summary == {"imported": 6, "skipped": 0, "failed": 0, "errors": []}


async def test_a_byte_order_mark_is_skipped(client, db, user_id) -> None:
    summary = await post_import(client, user_id, BOM + jsonl(history(2)))
    assert summary == {"imported": 2, "skipped": 0, "failed": 0, "errors": []}
    assert set(await imported_rows(db, user_id)) == {"h-0", "h-1"}


async def test_a_mem0_export_is_read_as_a_list_or_as_results(client, db, user_id) -> None:
    """A JSON list and an object with a "results" list, as mem0 exports them; "line" is the
    record's position, and a bad record (even one nested too deeply) fails alone."""
    records = [mem0_record(1, user_id), mem0_record(2, user_id), mem0_record(3, None)]
    as_list = json.dumps(records, indent=2).encode()
    summary = await post_import(client, user_id, BOM + as_list, headers=JSON)
    assert summary == {"imported": 3, "skipped": 0, "failed": 0, "errors": []}
    rows = await imported_rows(db, user_id)
    assert set(rows) == {"m0-1", "m0-2", "m0-3"}
    assert rows["m0-1"]["category"] == "hobbies"
    assert rows["m0-1"]["content"] == records[0]["memory"]

    deep = json.dumps(mem0_record(5, user_id, metadata={"x": 1})).replace(
        '{"x": 1}', deeply_nested()
    )
    results = (
        '{"results": ['
        + ", ".join(
            [
                json.dumps(mem0_record(1, user_id)),  # imported above: skipped
                json.dumps(mem0_record(4, user_id, memory="  ")),
                deep,
                json.dumps(mem0_record(6, user_id)),
            ]
        )
        + '], "relations": []}'
    ).encode()
    # Sent as JSON Lines (one line), in pieces: the shape is told by the body, not the header.
    summary = await post_import(client, user_id, chunked(results, 1000))
    assert (summary["imported"], summary["skipped"], summary["failed"]) == (1, 1, 2)
    assert [(e["line"], e["field"]) for e in summary["errors"]] == [(2, "memory"), (3, None)]
    assert "nested too deeply" in summary["errors"][1]["detail"]
    assert set(await imported_rows(db, user_id)) == {"m0-1", "m0-2", "m0-3", "m0-6"}

    not_an_export = await client.post(
        f"/v1/users/{user_id}/import", content=b'{\n  "memories": []\n}', headers=JSON
    )
    assert not_an_export.status_code == 400, not_an_export.text
    assert '"results" list' in not_an_export.json()["detail"]
