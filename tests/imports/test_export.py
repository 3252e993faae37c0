"""GET /v1/users/{u}/export and `python -m app export`: the import's line format, streamed;
current versions or all; vectors on request; the list's filters; the round trip through
another tenant; isolation between users and tenants."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import msgspec
import numpy as np
import pytest

from app.imports.lines import ImportLine
from tests.conftest import InProcessApi, run_cli_async
from tests.imports.helpers import jsonl, post_import
from tests.tenants.helpers import new_tenant, tenant_client

pytestmark = pytest.mark.xdist_group("export")


@asynccontextmanager
async def two_tenants(
    api: InProcessApi, admin: httpx.AsyncClient, label: str
) -> AsyncIterator[tuple[httpx.AsyncClient, httpx.AsyncClient]]:
    """Clients of two new tenants."""
    tenants = [await new_tenant(admin, f"{label}-{side}") for side in ("a", "b")]
    async with tenant_client(api, tenants[0].key) as a, tenant_client(api, tenants[1].key) as b:
        yield a, b


async def _export(http: httpx.AsyncClient, user: str, **params: object) -> bytes:
    response = await http.get(f"/v1/users/{user}/export", params=params)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/x-ndjson")
    return response.content


def _lines(body: bytes) -> list[dict]:
    return [json.loads(line) for line in body.decode().splitlines()]


async def _write_history(http: httpx.AsyncClient, user: str) -> dict[str, str]:
    """Every kind of memory: fields of every sort, a batch, an import, an update, a delete."""
    made = await http.post(
        f"/v1/users/{user}/memories",
        json={
            "content": "Ana lives in Lisbon near the river",
            "category": "personal_details",
            "speaker": "Ana",
            "event_time": "2024-05-01T10:00:00Z",
            "metadata": {"source": "chat", "tags": ["home", 2]},
            "agent_id": "planner",
            "run_id": "r1",
        },
    )
    assert made.status_code == 201, made.text
    batch = await http.post(
        f"/v1/users/{user}/memories/batch",
        json={
            "memories": [
                {
                    "content": "Prepare the slides for Monday",
                    "category": "professional",
                    "scope": "CONTEXT",
                    "session_id": "s1",
                },
                {"content": "Ana plays the cello on Sundays", "category": "hobbies"},
                {"content": "Ana coaches a running club", "agent_id": "coach"},
            ]
        },
    )
    assert batch.status_code == 201, batch.text
    gone = batch.json()["items"][1]
    imported = await post_import(
        http,
        user,
        jsonl(
            [
                {"external_id": "e-1", "content": "Ana is allergic to cats", "category": "health"},
                {"external_id": "e-2", "content": "Ana drinks green tea", "category": "dietary"},
            ]
        ),
    )
    assert imported["imported"] == 2, imported
    listed = (await http.get(f"/v1/users/{user}/memories")).json()["items"]
    e1 = next(m for m in listed if m["external_id"] == "e-1")
    # An update: its current version (v2) has no external id of its own; the chain keeps e-1.
    changed = await http.patch(
        f"/v1/users/{user}/memories/{e1['id']}",
        json={"content": "Ana is allergic to cats and dogs"},
    )
    assert changed.status_code == 200, changed.text
    deleted = await http.delete(f"/v1/users/{user}/memories/{gone['id']}")
    assert deleted.status_code == 200, deleted.text
    return {"made": made.json()["id"], "gone": gone["content"]}


async def test_an_export_imported_into_another_tenant_exports_the_same(
    inprocess_api: InProcessApi, admin: httpx.AsyncClient, user_id: str
) -> None:
    async with two_tenants(inprocess_api, admin, "ex") as (a, b):
        written = await _write_history(a, user_id)
        assert await _export(b, user_id) == b""  # the same user id in B: nothing yet

        first = await _export(a, user_id)
        lines = _lines(first)
        # Exactly the import's line format: every line decodes as one (unknown fields fail).
        for line in first.splitlines():
            msgspec.json.decode(line, type=ImportLine)
        contents = {line["content"] for line in lines}
        assert len(lines) == 5, lines
        assert written["gone"] not in contents  # deleted: not a current version
        assert "Ana is allergic to cats and dogs" in contents
        by_content = {line["content"]: line for line in lines}
        assert by_content["Ana is allergic to cats and dogs"]["external_id"] == "e-1"
        assert by_content["Ana lives in Lisbon near the river"] == {
            "content": "Ana lives in Lisbon near the river",
            "external_id": by_content["Ana lives in Lisbon near the river"]["external_id"],
            "speaker": "Ana",
            "event_time": "2024-05-01T10:00:00Z",
            "agent_id": "planner",
            "run_id": "r1",
            "scope": "USER",
            "category": "personal_details",
            "metadata": {"tags": ["home", 2], "source": "chat"},
            "language": "en",  # detected when written, carried to the other tenant
        }
        context = by_content["Prepare the slides for Monday"]
        assert (context["scope"], context["session_id"]) == ("CONTEXT", "s1")
        assert [line["external_id"] for line in lines] == sorted(
            line["external_id"] for line in lines
        )

        summary = await post_import(b, user_id, first)
        assert (summary["imported"], summary["failed"]) == (5, 0), summary
        second = await _export(b, user_id)
        assert second == first
        # What must differ: the memories themselves are new rows of tenant B.
        ids_a = {m["id"] for m in (await a.get(f"/v1/users/{user_id}/memories")).json()["items"]}
        ids_b = {m["id"] for m in (await b.get(f"/v1/users/{user_id}/memories")).json()["items"]}
        assert len(ids_a) == len(ids_b) == 5 and not ids_a & ids_b
        assert written["made"] in ids_a
        # Importing the export again changes nothing: every line is skipped.
        again = await post_import(b, user_id, first)
        assert (again["imported"], again["skipped"]) == (0, 5), again


async def test_every_version_vectors_and_filters(
    inprocess_api: InProcessApi, admin: httpx.AsyncClient, user_id: str, other_user_id: str
) -> None:
    async with two_tenants(inprocess_api, admin, "ev") as (a, b):
        written = await _write_history(a, user_id)
        # Another user of the same tenant, and the same user id in another tenant: never here.
        for http, user in ((a, other_user_id), (b, user_id)):
            response = await http.post(
                f"/v1/users/{user}/memories", json={"content": "Omar hides a spare key"}
            )
            assert response.status_code == 201

        every = _lines(await _export(a, user_id, versions="all"))
        assert len(every) == 7, every  # 5 current, e-1's first version, the deleted one
        keys = [line["external_id"] for line in every]
        assert "e-1@v1" in keys and "e-1@v2" in keys
        assert all("@v" in key for key in keys)
        assert written["gone"] in {line["content"] for line in every}
        for body in (await _export(a, user_id), await _export(a, user_id, versions="all")):
            assert b"spare key" not in body

        with_vectors = _lines(await _export(a, user_id, vectors="true"))
        for line in with_vectors:
            vector = np.asarray(line["embedding"])
            assert vector.shape == (768,)
            assert abs(float(np.linalg.norm(vector)) - 1.0) < 1e-3
        # Vectors round-trip too: imported as given (no model runs), exported the same.
        fresh = f"{user_id}-v"
        await post_import(b, fresh, jsonl(with_vectors))
        back = {
            line["external_id"]: line for line in _lines(await _export(b, fresh, vectors="true"))
        }
        for line in with_vectors:
            copy = back[line["external_id"]]
            assert {k: v for k, v in copy.items() if k != "embedding"} == {
                k: v for k, v in line.items() if k != "embedding"
            }
            assert np.allclose(copy["embedding"], line["embedding"], atol=1e-6)

        # The list's filters and scopes.
        health = {"field": "category", "op": "eq", "value": "health"}
        only = _lines(await _export(a, user_id, filters=json.dumps(health)))
        assert [line["content"] for line in only] == ["Ana is allergic to cats and dogs"]
        as_coach = {line["content"] for line in _lines(await _export(a, user_id, agent_id="coach"))}
        assert "Ana coaches a running club" in as_coach
        assert "Ana lives in Lisbon near the river" not in as_coach  # the planner's
        assert len(as_coach) == 4

        for params, field in (
            ({"filters": "{not json"}, "filters"),
            ({"filters": json.dumps({"field": "colour", "op": "eq", "value": 1})}, "filters.field"),
            ({"versions": "some"}, "versions"),
            ({"agent_id": ""}, "agent_id"),
        ):
            bad = await a.get(f"/v1/users/{user_id}/export", params=params)
            assert bad.status_code == 400, (params, bad.text)
            assert bad.headers["content-type"].startswith("application/problem+json")
            assert field in json.dumps(bad.json()), bad.json()
        bad_user = await a.get("/v1/users/no%20spaces/export")
        assert bad_user.status_code == 400


async def test_the_cli_writes_what_the_endpoint_streams(
    inprocess_api: InProcessApi, admin: httpx.AsyncClient, migrated, user_id: str, tmp_path
) -> None:
    tenant = await new_tenant(admin, "ex-cli")
    async with tenant_client(inprocess_api, tenant.key) as http:
        await _write_history(http, user_id)
        streamed = await _export(http, user_id, versions="all")
        planner = await _export(http, user_id, agent_id="planner")
    out = tmp_path / "export.jsonl"
    done = await run_cli_async(
        migrated,
        "app",
        "export",
        "--tenant",
        tenant.name,
        "--user",
        user_id,
        "--versions",
        "all",
        "--output",
        str(out),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert out.read_bytes() == streamed
    assert "exported 7 lines" in done.stderr
    to_stdout = await run_cli_async(
        migrated, "app", "export", "--tenant", tenant.name, "--user", user_id, "--agent", "planner"
    )
    assert to_stdout.returncode == 0, to_stdout.stderr[-3000:]
    assert to_stdout.stdout.encode() == planner
    refused = await run_cli_async(
        migrated, "app", "export", "--user", user_id, "--filters", '{"field": 1}'
    )
    assert refused.returncode == 2
    assert "--filters.field" in refused.stderr


def test_every_line_field_is_exported_from_the_memory() -> None:
    """A field of the line format is either derived (external id, vector, metadata, user) or
    read from the memory's attribute of the same name: one added to the line format without
    a memory attribute would be exported as nothing, silently, so it must be named here."""
    from app.db.models import Memory
    from app.imports.export import DERIVED_FIELDS

    copied = set(ImportLine.__struct_fields__) - DERIVED_FIELDS
    assert copied and all(hasattr(Memory, name) for name in copied), copied - set(dir(Memory))
    assert "agent_id" in copied and "run_id" in copied
