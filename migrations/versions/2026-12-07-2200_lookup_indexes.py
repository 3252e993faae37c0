"""Two indexes nothing had (issue 54): `ingest_decisions.memory_id`, for the analysts' "the
message behind every version of a chain" (docs/analysts.md), which read every decision (1.5 s
at 300k versions, 45 ms with the index), and `memories.category`, the foreign key to
`categories`: a category rename cascades to its memories, and without an index each rename
read the whole table while holding its locks (52 s of rewritten history in the attack run).

Built CONCURRENTLY, outside a transaction: reads and writes go on while they build; an
interrupted build's INVALID index is dropped and built again on a rerun (app.db.migration_safety).

Revision ID: 0040_lookup_indexes
Revises: 0039_entities
Create Date: 2026-12-07 22:00:00
"""

from collections.abc import Sequence

from app.db.migration_safety import create_index_concurrently, drop_index_concurrently

revision: str = "0040_lookup_indexes"
down_revision: str | None = "0039_entities"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

INDEXES = {
    "ingest_decisions_memory_id_idx": ("ingest_decisions", "(memory_id)"),
    "memories_category_idx": ("memories", "(category)"),
}


def upgrade() -> None:
    for name, (table, definition) in INDEXES.items():
        create_index_concurrently(name, table, definition)


def downgrade() -> None:
    for name in INDEXES:
        drop_index_concurrently(name)
