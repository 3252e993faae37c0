"""An index for memories.source_message_id (issue 42): its foreign key to messages is ON DELETE
SET NULL, so without one every deleted message (an erase deletes all of a user's) scanned every
memory version of every tenant to find the few that name it. Partial: memories written through
the API directly name no message, and the key's own lookup (`= $1`) implies NOT NULL.

Built CONCURRENTLY, outside a transaction: writes go on while it builds; an interrupted build's
INVALID index is dropped and built again on a rerun (app.db.migration_safety).

Revision ID: 0024_source_message_index
Revises: 0023_path_proof
Create Date: 2026-12-04 04:10:00
"""

from collections.abc import Sequence

from app.db.migration_safety import create_index_concurrently, drop_index_concurrently

revision: str = "0024_source_message_index"
down_revision: str | None = "0023_path_proof"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

INDEX = "memories_source_message_id_idx"


def upgrade() -> None:
    create_index_concurrently(
        INDEX, "memories", "(source_message_id) WHERE source_message_id IS NOT NULL"
    )


def downgrade() -> None:
    drop_index_concurrently(INDEX)
