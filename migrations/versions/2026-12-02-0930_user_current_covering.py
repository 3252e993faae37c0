"""The user's current memories counted from the index alone: memories_user_current_idx becomes
(user_id) INCLUDE (tenant_id) WHERE is_current.

Every search first counts the user's current memories, up to COGNIS_EXACT_SEARCH_MAX_MEMORIES
+ 1, to choose between an exact scan and the HNSW index (app/memories/repository.py,
`set_hnsw_scan`). Row security adds `tenant_id = <the request's tenant>` to that count, and
the old index (user_id, is_current) did not hold tenant_id, so every counted row was read from
the table: at 100,000 memories the planner chose a sequential scan, 105 ms where the
index-only scan of this index takes 6 ms (docs/benchmarks/filters.md). is_current was a
constant of the partial index; the INCLUDE column serves the row-security check instead.

Built concurrently (writes go on), then the old index is dropped concurrently; a rerun after
either step passes (create_index_concurrently rebuilds an INVALID one, the drop is IF EXISTS).

Revision ID: 0020_user_current_covering
Revises: 0019_scope_erasures
Create Date: 2026-12-02 09:30:00
"""

from collections.abc import Sequence

from app.db.migration_safety import create_index_concurrently, drop_index_concurrently

revision: str = "0020_user_current_covering"
down_revision: str | None = "0019_scope_erasures"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    create_index_concurrently(
        "memories_user_current_tenant_idx",
        "memories",
        "(user_id) INCLUDE (tenant_id) WHERE is_current",
    )
    drop_index_concurrently("memories_user_current_idx")


def downgrade() -> None:
    create_index_concurrently(
        "memories_user_current_idx", "memories", "(user_id, is_current) WHERE is_current"
    )
    drop_index_concurrently("memories_user_current_tenant_idx")
