"""`python -m app detect-languages`: the language (memories.language, migration 0028) of memory
versions stored before it was detected at write time.

Migration 0028 adds the column, and labels the rows itself only on a small database (at most
COGNIS_MIGRATION_INLINE_BACKFILL_ROWS versions without one, 10,000 by default): detection
costs about half a millisecond a version, so at a million versions the migration would have
held `alembic upgrade` for the better part of an hour. On a bigger one the migration says so
and leaves the rows NULL for this command, run while the service serves (it reads as the
background role, every tenant's rows, and writes nothing but the NULL column).

Until it has run, an older version reads as "no letters" (NULL): the BM25 language fields
(after `make reindex`) and `language` filters miss it, and a search in English does not hand it
to the multilingual leg. New writes are labelled when written.

Every version (a past one's language is part of its history), in batches by id: each batch
read in one short transaction, detected with none open, written in a second one; an interrupted
run keeps what it committed and a rerun takes the rows still NULL (a version without letters
stays NULL and is looked at again, cheaply). A row is only written while still NULL, so a
language a client gave meanwhile is never overwritten.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.db.models import Memory
from app.memories.sentence_backfill import next_batch
from app.ml.language import detect_language

_PENDING = (Memory.language.is_(None),)
_SET = text(
    "UPDATE memories AS m SET language = v.language "
    "FROM unnest(CAST(:ids AS uuid[]), CAST(:languages AS text[])) AS v(id, language) "
    "WHERE m.id = v.id AND m.language IS NULL"
)


@dataclass(slots=True)
class LanguageReport:
    read: int = 0  # versions looked at
    labelled: int = 0  # given a language (the rest have no letters)


def _detected(rows: list[tuple[uuid.UUID, str]]) -> list[tuple[uuid.UUID, str]]:
    return [(memory_id, lang) for memory_id, content in rows if (lang := detect_language(content))]


async def detect_missing_languages(
    sessionmaker: async_sessionmaker[AsyncSession],
    user_id: str | None = None,
    batch_size: int = 1000,
    progress: Callable[[LanguageReport], None] | None = None,
) -> LanguageReport:
    """Label the versions (of one user, or all) whose language is NULL; what was done.
    `progress` hears the running report after each batch."""
    report = LanguageReport()
    after: uuid.UUID | None = None
    while True:
        async with sessionmaker() as session, session.begin():
            query = next_batch((Memory.id, Memory.content), _PENDING, user_id, after, batch_size)
            rows = [(row.id, row.content) for row in (await session.execute(query)).all()]
        if not rows:
            return report
        # The detector is CPU work: off the event loop, with no transaction open.
        found = await asyncio.to_thread(_detected, rows)
        if found:
            ids, languages = zip(*found, strict=True)
            async with sessionmaker() as session, session.begin():
                await session.execute(_SET, {"ids": list(ids), "languages": list(languages)})
        after = rows[-1][0]
        report.read += len(rows)
        report.labelled += len(found)
        if progress is not None:
            progress(report)
