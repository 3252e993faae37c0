"""The language of each memory (issue 40): memories.language, ISO 639-1.

Given by the client on a write or detected from the content when the row is made
(app/ml/language.py); NULL for content without letters. BM25 searches Japanese, Chinese and
Korean text through fields of their own (app/search_index/documents.py), and searches and lists
can filter on it.

The column is nullable without a default (a catalog change, no rewrite); its CHECK is added NOT
VALID and validated in a transaction of its own. Existing rows are given their detected
language here only on a small database (issue 54): at most `inline_backfill_rows` (-x, or
COGNIS_MIGRATION_INLINE_BACKFILL_ROWS; 10,000) versions, as the planner counts them. Then they are labelled
tenant by tenant (row security binds each), in batches by id, each batch committed on its own:
an interrupted backfill keeps what it wrote, and a rerun takes the rows still NULL. On a bigger
database (detection takes about half a millisecond a version: most of an hour at a million)
the upgrade leaves them NULL and says to run `python -m app detect-languages`
(app/memories/language_backfill.py) while the service serves. `alembic upgrade --sql` cannot
detect languages: its script says to run that command. The index documents gain the field at
`make reindex`.

The downgrade drops the column without refusing: the next upgrade detects every language
again. Only a language a client gave against the detector's reading (a kanji-only Japanese
memory labelled `ja` where detection says `zh`) would come back differently.

Revision ID: 0028_memory_language
Revises: 0027_console_sessions
Create Date: 2026-12-04 09:00:00
"""

import sys
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from app.db.migration_locks import option
from app.db.migration_safety import validate_constraint
from app.ml.language import detect_language

revision: str = "0028_memory_language"
down_revision: str | None = "0027_console_sessions"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

CHECK = "memories_language_code_check"
BATCH = 1000
INLINE_ROWS = "10000"
COMMAND = "python -m app detect-languages"
_PENDING = sa.text(
    "SELECT id, content FROM memories WHERE language IS NULL AND id > :after ORDER BY id LIMIT :n"
)
_SET = sa.text(
    "UPDATE memories AS m SET language = v.language "
    "FROM unnest(CAST(:ids AS uuid[]), CAST(:languages AS text[])) AS v(id, language) "
    "WHERE m.id = v.id AND m.language IS NULL"
)
_ESTIMATE = sa.text("SELECT reltuples FROM pg_class WHERE oid = 'memories'::regclass")
_BIND_TENANT = sa.text("SELECT set_config('cognis.tenant_id', :tenant, false)")


def upgrade() -> None:
    op.execute("ALTER TABLE memories ADD COLUMN IF NOT EXISTS language text")
    op.execute(f"ALTER TABLE memories DROP CONSTRAINT IF EXISTS {CHECK}")
    op.execute(
        f"ALTER TABLE memories ADD CONSTRAINT {CHECK} CHECK (language ~ '^[a-z]{{2}}$') NOT VALID"
    )
    validate_constraint("memories", CHECK)
    op.execute(
        "COMMENT ON COLUMN memories.language IS 'The language of the content, ISO 639-1 (en, "
        "ja, ...): given by the client or detected when the version was written. NULL: content "
        "without letters. Japanese, Chinese and Korean text is searched by BM25 through fields "
        "analysed for it.'"
    )
    if op.get_context().as_sql:
        op.execute(f"-- memories.language: run `{COMMAND}` afterwards to detect it")
        return
    inline = int(option("inline_backfill_rows", INLINE_ROWS))
    if (rows := _estimated_rows()) > inline:
        print(
            f"0028_memory_language: about {rows} memory versions, more than {inline} to label "
            f"here; their language is left to `{COMMAND}` (rerunnable, while the service "
            "serves; about half a millisecond a version): run it after this upgrade",
            file=sys.stderr,
            flush=True,
        )
        return
    _backfill()


def _estimated_rows() -> int:
    """The planner's count of memories (pg_class: no scan, no row security to bind tenant by
    tenant), from a quick ANALYZE if the table was never analysed; outside the transaction, so
    no lock of the DDL above is held meanwhile."""
    bind = op.get_bind()
    with op.get_context().autocommit_block():
        if bind.execute(_ESTIMATE).scalar_one() < 0:
            bind.execute(sa.text("ANALYZE memories"))
        return max(0, int(bind.execute(_ESTIMATE).scalar_one()))


def _backfill() -> None:
    bind = op.get_bind()
    with op.get_context().autocommit_block():
        tenants = [str(row[0]) for row in bind.execute(sa.text("SELECT id FROM tenants"))]
        for tenant in tenants:
            bind.execute(_BIND_TENANT, {"tenant": tenant})
            after = "00000000-0000-0000-0000-000000000000"
            while rows := bind.execute(_PENDING, {"after": after, "n": BATCH}).all():
                found = [
                    (str(i), lang) for i, content in rows if (lang := detect_language(content))
                ]
                if found:
                    ids, languages = zip(*found, strict=True)
                    bind.execute(_SET, {"ids": list(ids), "languages": list(languages)})
                after = str(rows[-1][0])
        bind.execute(_BIND_TENANT, {"tenant": ""})


def downgrade() -> None:
    op.execute(f"ALTER TABLE memories DROP CONSTRAINT IF EXISTS {CHECK}")
    op.execute("ALTER TABLE memories DROP COLUMN IF EXISTS language")
