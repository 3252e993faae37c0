"""Plain functions the import tests share: lines to send, rows to read back."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import numpy as np
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

NDJSON = {"Content-Type": "application/x-ndjson"}
JSON = {"Content-Type": "application/json"}
BOM = b"\xef\xbb\xbf"


def deeply_nested(levels: int = 1500) -> str:
    """A JSON object nested `levels` deep, as text (json.dumps would recurse too deep)."""
    return '{"a": ' * levels + "1" + "}" * levels


def mem0_record(number: int, user_id: str | None = None, **fields: Any) -> dict[str, Any]:
    """A record as mem0's export has it (category given, so nothing needs classifying)."""
    return {
        "id": f"m0-{number}",
        "memory": f"Remembered thing number {number} from the mem0 export",
        "user_id": user_id,
        "metadata": None,
        "categories": ["sports"],
        "created_at": "2024-07-20T10:30:00-07:00",
        "updated_at": None,
        **fields,
    }


def jsonl(records: list[dict[str, Any] | str]) -> bytes:
    """Records as JSON Lines; a str is sent as it is (a deliberately broken line)."""
    return "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records).encode()


def history(count: int, prefix: str = "h", **fields: Any) -> list[dict[str, Any]]:
    """Distinct memories with categories given, so nothing needs classifying."""
    return [
        {
            "external_id": f"{prefix}-{i}",
            "content": f"Imported fact number {i} about the {prefix} archive",
            "category": "hobbies",
            **fields,
        }
        for i in range(count)
    ]


def random_vector(seed: int, scale: float = 3.0) -> list[float]:
    """A 768-number vector deliberately not of unit length."""
    return (np.random.default_rng(seed).normal(size=768) * scale).tolist()


async def chunked(body: bytes, size: int) -> AsyncIterator[bytes]:
    """The body in pieces of `size` bytes (sent with chunked transfer encoding)."""
    for start in range(0, len(body), size):
        yield body[start : start + size]


async def post_import(
    client: httpx.AsyncClient,
    user_id: str,
    body: bytes | AsyncIterator[bytes],
    headers: dict[str, str] = NDJSON,
    **params: Any,
) -> dict[str, Any]:
    response = await client.post(
        f"/v1/users/{user_id}/import", content=body, headers=headers, params=params
    )
    assert response.status_code == 200, response.text
    return response.json()


async def imported_rows(db: AsyncEngine, user_id: str) -> dict[str, dict[str, Any]]:
    """The user's memories by external id, with whether each has an index event."""
    async with db.connect() as connection:
        rows = await connection.execute(
            text(
                "SELECT m.external_id, m.id, m.content, m.category, m.scope, m.session_id,"
                " m.speaker, m.event_time, m.metadata, m.version, m.is_current,"
                " EXISTS (SELECT 1 FROM outbox o WHERE o.memory_id = m.id AND o.op = 'index')"
                " AS has_event"
                " FROM memories m WHERE m.user_id = :u"
            ),
            {"u": user_id},
        )
        result: dict[str, dict[str, Any]] = {}
        for row in rows.mappings():
            assert row["external_id"] not in result, "an external id imported twice"
            result[row["external_id"]] = dict(row)
        return result
