"""The multilingual vector of each memory (issue 40): memories.embedding_ml, vector(512).

all-mpnet-base-v2 (embedding_768d, embedding_256d) reads English only. Beside it, each memory
version gets the multilingual Universal Sentence Encoder's unit vector of its content
(app/ml/multilingual.py), which retrieval searches by cosine when the query is not English or
the user has memories that are not (app/retrieval/multilingual_leg.py). English searches keep
their own leg unchanged.

The column is nullable without a default (a catalog change, no rewrite): rows written before,
or while COGNIS_MULTILINGUAL_EMBEDDER is off, keep NULL, and the leg does not see them until
`python -m app embed-multilingual` fills them in (rerunnable, committed batches). The HNSW
index holds current versions only, as 0025 made the 256D one (every search reads current
versions alone); it is built CONCURRENTLY, so writes go on, and a rerun drops an INVALID one
first. Small users are scanned exactly, as by the 256D stage. A second partial index lists
each user's current versions in another script than Latin, so an English query learns in one probe
whether it needs the multilingual leg at all.

The downgrade drops the index and the column without refusing: the vectors are derived from
the content, and the command computes them again.

Revision ID: 0034_multilingual_vector
Revises: 0033_webhooks
Create Date: 2026-12-04 15:30:00
"""

from collections.abc import Sequence

from alembic import op

from app.db.migration_safety import create_index_concurrently, drop_index_concurrently

revision: str = "0034_multilingual_vector"
down_revision: str | None = "0033_webhooks"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

INDEX = "memories_embedding_ml_hnsw_idx"
OTHER_LANGUAGE_INDEX = "memories_user_other_language_idx"


def upgrade() -> None:
    op.execute("ALTER TABLE memories ADD COLUMN IF NOT EXISTS embedding_ml vector(512)")
    op.execute(
        "COMMENT ON COLUMN memories.embedding_ml IS 'The content''s multilingual vector (unit "
        "length, 512D, multilingual Universal Sentence Encoder v3): one space for 16 languages, "
        "so a Japanese question finds a Japanese or English memory by meaning. Compare with "
        "<=> (cosine distance); unrelated facts score about 0.1 cosine, paraphrases 0.3-0.7. "
        "NULL: written with COGNIS_MULTILINGUAL_EMBEDDER off or before migration 0034 "
        "(python -m app embed-multilingual fills it).'"
    )
    create_index_concurrently(
        INDEX,
        "memories",
        "USING hnsw (embedding_ml vector_cosine_ops) WITH (m = 16, ef_construction = 128) "
        "WHERE is_current",
    )
    op.execute(
        f"COMMENT ON INDEX {INDEX} IS 'HNSW over the multilingual vectors of current versions "
        "(cosine): the multilingual leg of a search of a user with more memories than an exact "
        "scan reads.'"
    )
    create_index_concurrently(
        OTHER_LANGUAGE_INDEX,
        "memories",
        "(user_id) INCLUDE (tenant_id) WHERE is_current AND language IN ('ja', 'ko', 'ru', 'zh')",
    )
    op.execute(
        f"COMMENT ON INDEX {OTHER_LANGUAGE_INDEX} IS 'The current versions in another script "
        "than Latin (Japanese, Korean, Russian, Chinese), by user: whether an English query also searches the multilingual vectors is one probe "
        "(empty for users who write English only).'"
    )


def downgrade() -> None:
    drop_index_concurrently(OTHER_LANGUAGE_INDEX)
    drop_index_concurrently(INDEX)
    op.execute("ALTER TABLE memories DROP COLUMN IF EXISTS embedding_ml")
