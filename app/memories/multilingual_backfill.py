"""`python -m app embed-multilingual`: the multilingual vector (memories.embedding_ml, migration
0034) for current memories written without it: before 0034, or while
COGNIS_MULTILINGUAL_EMBEDDER was off. Until then the multilingual leg does not see them.

Current versions only (what search reads), in batches by id: each batch read in one short
transaction, encoded with none open, and written in a second one; an interrupted run keeps
what it committed and a rerun takes the rows still NULL. A row is only
written while still NULL, so a concurrent write's vector is never overwritten.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.db.models import Memory
from app.memories.sentence_backfill import next_batch
from app.ml.multilingual import MultilingualEncoder

_PENDING = (Memory.is_current, Memory.embedding_ml.is_(None))


async def embed_missing_multilingual(
    sessionmaker: async_sessionmaker[AsyncSession],
    encoder: MultilingualEncoder,
    user_id: str | None = None,
    batch_size: int = 500,
    progress: Callable[[int], None] | None = None,
) -> int:
    """Give the current memories (of one user, or all) without a multilingual vector theirs;
    how many were given one. `progress` hears the running count after each batch."""
    done = 0
    after: uuid.UUID | None = None
    while True:
        # The model call between two short transactions, never inside one.
        async with sessionmaker() as session, session.begin():
            query = next_batch((Memory.id, Memory.content), _PENDING, user_id, after, batch_size)
            rows = (await session.execute(query)).all()
        if not rows:
            return done
        vectors = await encoder.encode([row.content for row in rows])
        async with sessionmaker() as session, session.begin():
            for row, vector in zip(rows, vectors, strict=True):
                await session.execute(
                    update(Memory)
                    .where(Memory.id == row.id, Memory.embedding_ml.is_(None))
                    .values(embedding_ml=vector)
                )
        after = rows[-1].id
        done += len(rows)
        if progress is not None:
            progress(done)
