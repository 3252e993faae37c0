"""Every foreign key can find its referencing rows by an index: a deleted or re-keyed parent
row otherwise scans the whole child table (memories.source_message_id did until 0024, at every
deleted message of an erase)."""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

# Keys whose parent rows are never deleted while children exist, each with its reason.
EXEMPT = {
    # (memories_category_fkey has its index since 0040: a category rename cascaded through
    # every version without it.)
    # One row per analyst login role: a tenant's delete reads a handful of rows.
    "analyst_tenants_tenant_id_fkey",
}

# An index serves a key when the key's columns are its leading columns, in any order.
UNINDEXED = """
SELECT c.conname FROM pg_constraint c
WHERE c.contype = 'f' AND c.connamespace = 'public'::regnamespace
  AND NOT EXISTS (
      SELECT 1 FROM pg_index i
      WHERE i.indrelid = c.conrelid AND i.indisvalid
        AND (i.indkey::int2[])[0:array_length(c.conkey, 1) - 1] @> c.conkey
        AND (i.indkey::int2[])[0:array_length(c.conkey, 1) - 1] <@ c.conkey)
"""


async def test_every_foreign_key_has_an_index_for_its_referencing_rows(
    owner: AsyncEngine,
) -> None:
    async with owner.connect() as connection:
        unindexed = set((await connection.execute(text(UNINDEXED))).scalars())
    assert unindexed - EXEMPT == set()
    # The exemptions are real keys still: a renamed or dropped one is noticed here.
    assert unindexed >= EXEMPT


async def test_deleting_a_message_finds_its_memories_by_the_index(owner: AsyncEngine) -> None:
    """The statement the key's ON DELETE SET NULL runs, planned as the server plans it."""
    async with owner.connect() as connection:
        await connection.execute(text("SET enable_seqscan = off"))
        plan = "\n".join(
            (
                await connection.execute(
                    text(
                        "EXPLAIN UPDATE memories SET source_message_id = NULL "
                        "WHERE source_message_id = gen_random_uuid()"
                    )
                )
            ).scalars()
        )
    assert "memories_source_message_id_idx" in plan
