"""`python -m app import` in its own process, as an admin runs it."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import uuid

from sqlalchemy import text

from tests.conftest import ROOT, run_cli, run_cli_async
from tests.factories import create_memory
from tests.imports.helpers import (
    BOM,
    deeply_nested,
    history,
    imported_rows,
    jsonl,
    mem0_record,
    random_vector,
)


async def test_cli_imports_jsonl_and_resumes(migrated, db, user_id, tmp_path) -> None:
    lines = [
        {**line, "embedding": random_vector(i)} for i, line in enumerate(history(7, prefix="c"))
    ]
    half = tmp_path / "half.jsonl"
    half.write_bytes(jsonl(lines[:3]))
    whole = tmp_path / "whole.jsonl"
    whole.write_bytes(jsonl([*lines, "{broken"]))

    first = await run_cli_async(
        migrated, "app", "import", str(half), "--user", user_id, "--batch-size", "2"
    )
    assert first.returncode == 0, first.stderr[-3000:]
    assert json.loads(first.stdout)["imported"] == 3
    assert "read 3 lines: imported 3" in first.stderr

    second = await run_cli_async(migrated, "app", "import", str(whole), "--user", user_id)
    assert second.returncode == 1, second.stderr[-3000:]  # one line failed
    summary = json.loads(second.stdout)
    assert (summary["imported"], summary["skipped"], summary["failed"]) == (4, 3, 1)
    assert summary["errors"][0]["line"] == 8
    rows = await imported_rows(db, user_id)
    assert set(rows) == {f"c-{i}" for i in range(7)}
    assert all(r["has_event"] for r in rows.values())


async def test_cli_reads_a_mem0_export(migrated, db, tmp_path) -> None:
    alice, bob = f"alice-{uuid.uuid4().hex[:8]}", f"bob-{uuid.uuid4().hex[:8]}"
    records = [
        {
            "id": str(uuid.uuid4()),
            "memory": "Has two sisters who live in Lisbon",
            "user_id": alice,
            "metadata": {"app": "mem0"},
            "categories": ["family"],
            "created_at": "2024-07-20T10:30:00.123456-07:00",
            "updated_at": "2024-07-21T10:30:00-07:00",
        },
        {
            "id": str(uuid.uuid4()),
            "memory": "Works as a nurse at the city hospital",
            "user_id": bob,
            "metadata": None,
            "categories": ["misc"],  # no counterpart: classified
            "created_at": "2024-07-22T08:00:00+00:00",
            "updated_at": None,
        },
    ]
    export = tmp_path / "mem0.json"
    export.write_text(json.dumps(records, indent=2))

    result = await run_cli_async(migrated, "app", "import", str(export))
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout)["imported"] == 2
    (sisters,) = (await imported_rows(db, alice)).values()
    assert sisters["external_id"] == records[0]["id"]
    assert sisters["content"] == records[0]["memory"]
    assert sisters["category"] == "relationships"
    assert sisters["metadata"] == {"app": "mem0"}
    assert sisters["event_time"].isoformat() == "2024-07-20T17:30:00.123456+00:00"
    (nurse,) = (await imported_rows(db, bob)).values()
    assert nurse["category"] in {"professional", "health"}

    # --user overrides the records' users (and this user has neither id yet).
    carol = f"carol-{uuid.uuid4().hex[:8]}"
    wrapped = tmp_path / "results.json"
    wrapped.write_text(json.dumps({"results": records}))
    again = await run_cli_async(
        migrated, "app", "import", str(wrapped), "--user", carol, "--format", "mem0"
    )
    assert again.returncode == 0, again.stderr[-3000:]
    assert json.loads(again.stdout)["imported"] == 2
    assert len(await imported_rows(db, carol)) == 2
    assert len(await imported_rows(db, alice)) == 1


async def test_defer_index_rebuilds_the_hnsw_indexes(migrated, db, user_id, tmp_path) -> None:
    path = tmp_path / "lines.jsonl"
    path.write_bytes(
        jsonl([{**line, "embedding": random_vector(i)} for i, line in enumerate(history(3))])
    )
    result = await run_cli_async(
        migrated, "app", "import", str(path), "--user", user_id, "--defer-index"
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "dropping the HNSW indexes" in result.stderr
    assert "built memories_embedding_256d_hnsw_idx" in result.stderr
    async with db.connect() as connection:
        indexes = dict(
            (
                await connection.execute(
                    text("SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'memories'")
                )
            ).all()
        )
    # Rebuilt as the models define them: the 256D index only (migration 0005 dropped the other).
    assert "vector_cosine_ops" in indexes["memories_embedding_256d_hnsw_idx"]
    assert "ef_construction='128'" in indexes["memories_embedding_256d_hnsw_idx"]
    assert "memories_embedding_768d_hnsw_idx" not in indexes
    assert len(await imported_rows(db, user_id)) == 3


async def test_cli_reads_as_the_endpoint_does(
    migrated, db, client, user_id, other_user_id, tmp_path
) -> None:
    """A byte-order mark, a record nested too deeply and a user erased while the import runs,
    as a file."""
    await create_memory(client, other_user_id, "Soon to be forgotten")
    assert (await client.delete(f"/v1/users/{other_user_id}")).status_code == 200
    async with db.begin() as connection:
        # The erase dated after every CLI run below begins: as far as each import knows, the
        # user is erased while it runs (tests/imports/test_import_api.py erases one for real).
        await connection.execute(
            text(
                "UPDATE user_erasures SET erased_at = now() + interval '1 hour',"
                " writes_refused_until = now() + interval '2 hours' WHERE user_id = :u"
            ),
            {"u": other_user_id},
        )

    # A mem0 list naming its users: the erased user's records fail, each with its position.
    deep = json.dumps(mem0_record(2, user_id, metadata={"x": 1})).replace(
        '{"x": 1}', deeply_nested()
    )
    records = [
        json.dumps(mem0_record(1, user_id)),
        deep,
        json.dumps(mem0_record(3, other_user_id)),
        json.dumps(mem0_record(4, user_id)),
    ]
    export = tmp_path / "mem0.json"
    export.write_bytes(BOM + ("[\n" + ",\n".join(records) + "\n]").encode())
    listed = await asyncio.to_thread(run_cli, migrated, "app", "import", str(export))
    assert listed.returncode == 1, listed.stderr[-3000:]
    summary = json.loads(listed.stdout)
    assert (summary["imported"], summary["failed"]) == (2, 2)
    errors = {e["line"]: e for e in summary["errors"]}
    assert set(errors) == {2, 3}
    assert "nested too deeply" in errors[2]["detail"]
    assert errors[3]["field"] == "user_id" and "erased" in errors[3]["detail"]
    assert set(await imported_rows(db, user_id)) == {"m0-1", "m0-4"}
    assert await imported_rows(db, other_user_id) == {}

    # JSON Lines with a BOM: the same, line by line.
    lines = tmp_path / "lines.jsonl"
    deep_line = f'{{"external_id": "deep", "content": "x", "metadata": {deeply_nested()}}}'
    lines.write_bytes(BOM + jsonl([*history(2), deep_line]))
    read = await asyncio.to_thread(
        run_cli, migrated, "app", "import", str(lines), "--user", user_id
    )
    assert read.returncode == 1, read.stderr[-3000:]
    summary = json.loads(read.stdout)
    assert (summary["imported"], summary["failed"]) == (2, 1)
    assert summary["errors"][0]["line"] == 3

    # Every line for the user erased while it runs: refused as a whole, nothing written.
    refused = await asyncio.to_thread(
        run_cli, migrated, "app", "import", str(lines), "--user", other_user_id
    )
    assert refused.returncode == 2, refused.stderr[-3000:]
    assert "erased" in refused.stderr
    assert await imported_rows(db, other_user_id) == {}


def test_cli_refuses_what_it_cannot_read(migrated, tmp_path) -> None:
    lines = tmp_path / "lines.jsonl"
    lines.write_bytes(jsonl(history(1)))
    bad_user = run_cli(migrated, "app", "import", str(lines), "--user", "not a user id")
    assert bad_user.returncode == 2
    assert "user_id must be" in bad_user.stderr
    document = tmp_path / "document.json"
    document.write_text('{\n  "memories": []\n}')
    not_an_export = run_cli(migrated, "app", "import", str(document), "--user", "alice")
    assert not_an_export.returncode == 2
    assert '"results" list' in not_an_export.stderr
    assert run_cli(migrated, "app", "import", str(tmp_path / "missing.jsonl")).returncode == 2


async def test_sigterm_keeps_what_is_committed_and_a_rerun_resumes(
    migrated, db, user_id, tmp_path
) -> None:
    lines = [
        {**line, "embedding": random_vector(i)} for i, line in enumerate(history(600, prefix="t"))
    ]
    path = tmp_path / "lines.jsonl"
    path.write_bytes(jsonl(lines))
    returncode, stdout, stderr = await asyncio.to_thread(
        _terminated_after_first_batch,
        migrated,
        "app",
        "import",
        str(path),
        "--user",
        user_id,
        "--batch-size",
        "20",
    )
    assert returncode == 130, stderr[-3000:]
    assert "interrupted: read" in stderr and stdout == ""
    rows = await imported_rows(db, user_id)
    assert 0 < len(rows) < 600
    assert all(r["has_event"] for r in rows.values())  # nothing half-written

    rerun = await run_cli_async(migrated, "app", "import", str(path), "--user", user_id)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    summary = json.loads(rerun.stdout)
    assert (summary["imported"], summary["skipped"]) == (600 - len(rows), len(rows))
    assert len(await imported_rows(db, user_id)) == 600


def _terminated_after_first_batch(env: dict[str, str], *args: str) -> tuple[int, str, str]:
    """Run the CLI, send SIGTERM once it reports its first committed batch."""
    process = subprocess.Popen(
        [sys.executable, "-m", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    for line in process.stderr:
        if line.startswith("read "):
            break
    process.send_signal(signal.SIGTERM)
    stdout, stderr = process.communicate(timeout=120)
    return process.returncode, stdout, stderr
