"""The 256D HNSW index holds current versions only (issue 42): every vector search reads
current versions alone (`is_current` in its WHERE, which the partial index's predicate then
serves), but the graph held every version, so a history-heavy user's graph was mostly
superseded versions that filtered scans walked past, every superseding update added an entry,
and the index grew with the history (bench/hnsw_history.py, docs/benchmarks/hnsw.md).

The new index is built CONCURRENTLY under a temporary name, the old one dropped concurrently
and the new one renamed: reads and writes go on throughout (vector searches use whichever
index exists, or scan exactly for a moment). Each step is safe to repeat, so a rerun resumes
where an interruption left it.

Revision ID: 0025_current_hnsw
Revises: 0024_source_message_index
Create Date: 2026-12-04 04:20:00
"""

from collections.abc import Sequence

from alembic import op

from app.db.migration_safety import create_index_concurrently, drop_index_concurrently, exists

revision: str = "0025_current_hnsw"
down_revision: str | None = "0024_source_message_index"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

NAME = "memories_embedding_256d_hnsw_idx"
GRAPH = "USING hnsw (embedding_256d vector_cosine_ops) WITH (m = 16, ef_construction = 128)"


def _swap(where: str, done: str) -> None:
    """Build the index as `GRAPH` + `where` beside the old one, then take its name."""
    if exists(f"(SELECT {done} FROM pg_indexes WHERE indexname = '{NAME}')"):  # noqa: S608
        return
    building = f"{NAME}_new"
    create_index_concurrently(building, "memories", f"{GRAPH} {where}".strip())
    drop_index_concurrently(NAME)
    with op.get_context().autocommit_block():
        op.execute(f"ALTER INDEX IF EXISTS {building} RENAME TO {NAME}")


def upgrade() -> None:
    _swap("WHERE is_current", "indexdef LIKE '%WHERE is_current%'")


def downgrade() -> None:
    _swap("", "indexdef NOT LIKE '%WHERE%'")
