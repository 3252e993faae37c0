"""Sentence vectors for memories written without them (before migration 0021, or with
COGNIS_SENTENCE_VECTORS off): `python -m app embed-sentences`.

Current versions only (what search reads), in batches by id, each in its own transaction:
an interrupted run keeps what it committed and a rerun goes on from there, since it picks
the rows whose `sentence_embeddings_768d` is still NULL. A memory of one sentence gets an
empty array, so it is not read again. The model runs at the bulk class: searches and
interactive writes of a running API go first on a shared embedding server.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.db.models import Memory
from app.memories.sentences import sentence_texts
from app.ml.batching import Work, WorkClass
from app.ml.embedder import Embedder


@dataclass(slots=True)
class BackfillReport:
    memories: int = 0  # memories given their sentence vectors (or their empty array)
    sentences: int = 0  # sentence vectors embedded


async def embed_missing_sentences(
    sessionmaker: async_sessionmaker[AsyncSession],
    embedder: Embedder,
    user_id: str | None = None,
    batch_size: int = 200,
    progress: Callable[[BackfillReport], None] | None = None,
) -> BackfillReport:
    """Give every current memory (of one user, or all) without sentence vectors its own."""
    report = BackfillReport()
    after: uuid.UUID | None = None
    while True:
        async with sessionmaker() as session, session.begin():
            query = (
                select(Memory.id, Memory.content, Memory.speaker)
                .where(Memory.is_current, Memory.sentence_embeddings_768d.is_(None))
                .order_by(Memory.id)
                .limit(batch_size)
            )
            if user_id is not None:
                query = query.where(Memory.user_id == user_id)
            if after is not None:
                query = query.where(Memory.id > after)
            rows = (await session.execute(query)).all()
            if not rows:
                return report
            texts = [sentence_texts(row.content, row.speaker) for row in rows]
            flat = [text for sentences in texts for text in sentences]
            embedded = iter(await embedder.embed(flat, Work(WorkClass.BULK)) if flat else [])
            for row, sentences in zip(rows, texts, strict=True):
                await session.execute(
                    update(Memory)
                    .where(Memory.id == row.id, Memory.sentence_embeddings_768d.is_(None))
                    .values(sentence_embeddings_768d=[next(embedded).full for _ in sentences])
                )
            after = rows[-1].id
        report.memories += len(rows)
        report.sentences += len(flat)
        if progress is not None:
            progress(report)
