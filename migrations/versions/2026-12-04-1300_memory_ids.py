"""Memory ids that last (issue 41, item 2): the comments say which id is which.

The API's `id` of a memory is now `memories.chain_id`, the same for the memory's whole life
(it is its version 1's id, so every id a create ever returned names the memory still), and
`version_id` is `memories.id`, one per version; `replaces_id` stays a version's id. No table
changes: the same two columns, only named for what they are, on the table and on the analysts'
views (COMMENT ON only, nothing rewritten or locked beyond a moment). The downgrade puts back
the comments 0016_reader_roles wrote.

Revision ID: 0029_memory_ids
Revises: 0028_memory_language
Create Date: 2026-12-04 13:00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0029_memory_ids"
down_revision: str | None = "0028_memory_language"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

MEMORY_ID = (
    "The memory''s id, the same for its whole life (the API''s `id`): the id of its version 1, "
    "shared by all its versions."
)
VERSION_ID = (
    "The version''s id (the API''s `version_id`); the memory''s id is chain_id, which the API "
    "returns as `id`."
)
REPLACES_ID = "The version this one replaced (a version''s id, memories.id), NULL for version 1."

COMMENTS = {
    "memories.id": VERSION_ID,
    "memories.chain_id": MEMORY_ID,
    "memories.replaces_id": REPLACES_ID,
    "current_memories.id": "The current version''s id (the API''s `version_id`); the memory''s "
    "id is chain_id.",
    "current_memories.chain_id": MEMORY_ID,
    "memory_versions.id": VERSION_ID,
    "memory_versions.chain_id": MEMORY_ID,
    "memory_versions.replaces_id": REPLACES_ID,
    "memory_versions.replaced_by_id": "The version that replaced this one (a version''s id), "
    "NULL if current or deleted.",
    "ingest_decisions.target_memory_id": "The version an UPDATE, DELETE or NONE refers to (a "
    "version''s id, memories.id).",
    "ingest_decisions.memory_id": "The version it wrote (a version''s id, memories.id; the "
    "memory''s id is that row''s chain_id).",
}
# What 0016_reader_roles wrote (sql/table_comments_v1.sql, sql/analyst_views_v2.sql).
EARLIER = {
    "memories.id": "The version''s id.",
    "memories.chain_id": "The memory''s chain: the id of its version 1, shared by all its "
    "versions.",
    "memories.replaces_id": "The version this one replaced, NULL for version 1.",
    "current_memories.id": "The current version''s id.",
    "current_memories.chain_id": "The memory''s chain: the id of its version 1, shared by all "
    "its versions.",
    "memory_versions.id": "The version''s id.",
    "memory_versions.chain_id": "The memory''s chain: the id of its version 1.",
    "memory_versions.replaces_id": "The version this one replaced, NULL for version 1.",
    "memory_versions.replaced_by_id": "The version that replaced this one, NULL if current or "
    "deleted.",
    "ingest_decisions.target_memory_id": "The version an UPDATE, DELETE or NONE refers to.",
    "ingest_decisions.memory_id": "The version it wrote.",
}


def _comment(comments: dict[str, str]) -> None:
    for column, comment in comments.items():
        op.execute(f"COMMENT ON COLUMN {column} IS '{comment}'")


def upgrade() -> None:
    _comment(COMMENTS)


def downgrade() -> None:
    _comment(EARLIER)
