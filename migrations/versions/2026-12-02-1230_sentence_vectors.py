"""Sentence vectors: memories.sentence_embeddings_768d, one 768D vector per sentence.

A memory of several sentences is embedded sentence by sentence too (app/memories/sentences.py),
so the vector leg can score it by the sentence nearest the query (lever `sentence_vector`).
NULL: not embedded yet (every memory at first: see below); an empty array: one sentence,
whose vector is the content's.

The sentence worker embeds them while the model is idle (app/memories/sentence_backfill.py):
`memories_sentences_pending_idx`, a partial index of the current rows still NULL, is its
queue (every existing row is in it after the upgrade; the worker, or the command, empties it).

The column is nullable without a default: a catalog change, no rewrite, whatever the table's
size; the index is built concurrently (writes go on). Rerunnable: IF NOT EXISTS, its comment
(sql/sentence_vectors_v1.sql) set again, and create_index_concurrently's INVALID-index
rebuild.
The vectors are derived from the content and can be computed again, so the downgrade drops
them without refusing.

Revision ID: 0021_sentence_vectors
Revises: 0020_user_current_covering
Create Date: 2026-12-02 12:30:00
"""

from collections.abc import Sequence

from alembic import op

from app.db.migration_safety import create_index_concurrently, drop_index_concurrently
from app.db.sqlscript import run_sql_file

revision: str = "0021_sentence_vectors"
down_revision: str | None = "0020_user_current_covering"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute(
        "ALTER TABLE memories ADD COLUMN IF NOT EXISTS sentence_embeddings_768d vector(768)[]"
    )
    run_sql_file("sentence_vectors_v1.sql")
    create_index_concurrently(
        "memories_sentences_pending_idx",
        "memories",
        "(id) WHERE is_current AND sentence_embeddings_768d IS NULL",
    )


def downgrade() -> None:
    drop_index_concurrently("memories_sentences_pending_idx")
    op.execute("ALTER TABLE memories DROP COLUMN IF EXISTS sentence_embeddings_768d")
