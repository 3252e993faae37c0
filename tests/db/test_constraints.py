"""The schema makes bad states impossible, whatever code writes to it."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

VECTOR_768 = "[" + ",".join(["0.1"] * 768) + "]"
VECTOR_256 = "[" + ",".join(["0.1"] * 256) + "]"

INSERT = text(
    """
    INSERT INTO memories (id, user_id, chain_id, version, content, category, scope, session_id,
                          is_current, replaces_id, superseded_at, embedding_768d, embedding_256d)
    VALUES (:id, :user_id, :chain_id, :version, :content, :category, :scope, :session_id,
            :is_current, :replaces_id, :superseded_at, CAST(:e768 AS vector), CAST(:e256 AS vector))
    """
)


def row(**overrides) -> dict:
    memory_id = uuid.uuid4()
    values = {
        "id": memory_id,
        "user_id": "constraint-user",
        "chain_id": memory_id,
        "version": 1,
        "content": "a fact",
        "category": "preferences",
        "scope": "USER",
        "session_id": None,
        "is_current": True,
        "replaces_id": None,
        "superseded_at": None,
        "e768": VECTOR_768,
        "e256": VECTOR_256,
    }
    values.update(overrides)
    return values


async def _insert(db, *rows: dict) -> None:
    async with db.begin() as connection:
        for values in rows:
            await connection.execute(INSERT, values)


@pytest.mark.parametrize(
    ("overrides", "constraint"),
    [
        ({"scope": "GLOBAL"}, "memories_scope_check"),
        ({"scope": "CONTEXT"}, "memories_context_session_check"),
        ({"category": "astrology"}, "memories_category_fkey"),
        ({"content": "   "}, "memories_content_not_blank_check"),
        ({"is_current": False}, "memories_current_not_superseded_check"),
        ({"version": 2}, "memories_first_version_replaces_nothing_check"),
    ],
)
async def test_single_row_constraints(db, overrides, constraint) -> None:
    with pytest.raises(IntegrityError, match=constraint):
        await _insert(db, row(**overrides))


async def test_a_chain_cannot_have_two_current_versions(db) -> None:
    root = row()
    second = row(chain_id=root["id"], version=2, replaces_id=root["id"])
    with pytest.raises(IntegrityError, match="memories_chain_current_idx"):
        await _insert(db, root, second)


async def test_a_chain_cannot_fork(db) -> None:
    root = row(is_current=False, superseded_at=datetime(2026, 1, 1, tzinfo=UTC))
    branch_a = row(
        chain_id=root["id"],
        version=2,
        replaces_id=root["id"],
        is_current=False,
        superseded_at=datetime(2026, 1, 2, tzinfo=UTC),
    )
    branch_b = row(chain_id=root["id"], version=3, replaces_id=root["id"])
    with pytest.raises(IntegrityError, match="memories_replaces_id_idx"):
        await _insert(db, root, branch_a, branch_b)


async def test_a_valid_context_row_is_accepted(db) -> None:
    values = row(scope="CONTEXT", session_id="s-1", user_id=f"ok-{uuid.uuid4().hex[:6]}")
    await _insert(db, values)
    async with db.connect() as connection:
        stored = (
            await connection.execute(
                text("SELECT scope, session_id FROM memories WHERE id = :id"), {"id": values["id"]}
            )
        ).one()
    assert tuple(stored) == ("CONTEXT", "s-1")


async def test_a_deployment_files_memories_under_its_own_category(db) -> None:
    name = f"pets_{uuid.uuid4().hex[:6]}"
    async with db.begin() as connection:
        await connection.execute(
            text(
                "INSERT INTO categories (name, description, examples) "
                "VALUES (:n, 'Pets and animals', ARRAY['I have a cat'])"
            ),
            {"n": name},
        )
        seeded = (await connection.execute(text("SELECT count(*) FROM categories"))).scalar_one()
    assert seeded >= 16  # the paper's 15 seed rows and this one
    values = row(category=name, user_id=f"ok-{uuid.uuid4().hex[:6]}")
    await _insert(db, values)
    try:
        # A category in use cannot be dropped from under its memories.
        with pytest.raises(IntegrityError, match="memories_category_fkey"):
            async with db.begin() as connection:
                await connection.execute(
                    text("DELETE FROM categories WHERE name = :n"), {"n": name}
                )
    finally:  # the next session's schema reset downgrades past the table
        async with db.begin() as connection:
            await connection.execute(
                text("DELETE FROM memories WHERE id = :id"), {"id": values["id"]}
            )
            await connection.execute(text("DELETE FROM categories WHERE name = :n"), {"n": name})
