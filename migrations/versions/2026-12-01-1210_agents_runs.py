"""Agents and runs as scopes beside the session: memories.agent_id / run_id and
messages.agent_id / run_id (a memory derived from a message inherits them).

NULL means shared: a search that names an agent sees that agent's memories and the user's
shared ones (app/memories/filters.py, `visible_to`). Nullable columns without a default are a
catalog change (no rewrite, whatever the table's size); IF NOT EXISTS so that a rerun after
the partial index builds (concurrent, outside the transaction) passes. The analysts' views
are left as released (their SQL is frozen, and functions depend on them): analysts read the
new columns in `memories` and `messages`, which carry comments like every other column.

Revision ID: 0018_agents_runs
Revises: 0017_memory_expiry
Create Date: 2026-12-01 12:10:00
"""

from collections.abc import Sequence

from alembic import op

from app.db.migration_safety import (
    create_index_concurrently,
    drop_index_concurrently,
    refuse_data_loss,
)

revision: str = "0018_agents_runs"
down_revision: str | None = "0017_memory_expiry"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# (table, column, its comment: every column analysts read explains itself, as in 0016)
_COLUMNS = (
    ("memories", "agent_id", "The agent it belongs to; NULL: shared by all the user's agents."),
    ("memories", "run_id", "The run (task, episode) it came from; NULL: of no run."),
    ("messages", "agent_id", "The agent of the conversation; its memories inherit it."),
    ("messages", "run_id", "The run of the conversation; its memories inherit it."),
)


def upgrade() -> None:
    for table, column, comment in _COLUMNS:
        op.execute(f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS {column} text")
        quoted = comment.replace("'", "''")
        op.execute(f"COMMENT ON COLUMN {table}.{column} IS '{quoted}'")
    for column in ("agent_id", "run_id"):
        create_index_concurrently(
            f"memories_user_{column}_idx",
            "memories",
            f"(user_id, {column}) WHERE {column} IS NOT NULL",
        )


def downgrade() -> None:
    refuse_data_loss(
        "the agents and runs of memories and messages",
        (
            (
                "memories with an agent or run",
                "SELECT count(*) FROM memories WHERE agent_id IS NOT NULL OR run_id IS NOT NULL",
            ),
            (
                "messages with an agent or run",
                "SELECT count(*) FROM messages WHERE agent_id IS NOT NULL OR run_id IS NOT NULL",
            ),
        ),
    )
    for column in ("run_id", "agent_id"):
        drop_index_concurrently(f"memories_user_{column}_idx")
    for table, column, _ in reversed(_COLUMNS):
        op.execute(f"ALTER TABLE {table} DROP COLUMN IF EXISTS {column}")
