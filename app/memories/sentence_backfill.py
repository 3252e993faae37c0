"""Sentence vectors of large writes are embedded in the background, when the model is idle.

A small API write (at most COGNIS_SENTENCE_VECTORS_AT_WRITE sentences: one memory, a small
user's batch) embeds its sentences in its own model call (app/memories/drafts.py), so a
search right after it ranks by them (docs/benchmarks/chat-users.md). A larger batch, a batch
job or an import stores its memories with the content's (and context's) vector only:
embedding every sentence as well, in the write's own call, more than halved batch creates
(0.97 of the model's raw speed to 0.37, docs/benchmarks/ingestion.md) and doubled
time-to-searchable. Such a memory starts with `sentence_embeddings_768d` NULL, is searchable
at once by its content and context (a search says how many results it ranked so:
`sentences_pending`), and gains its sentence vectors (lever `sentence_vector`) when the model
is idle (a message's new memory in the message's own words, without a speaker, comes with
them: its decision embedded the same sentences, app/ingest/apply.py):

- `SentenceWorker` (app/ingest/sentence_worker.py), beside the ingestion workers
  (COGNIS_SENTENCE_VECTORS), takes the next
  few current memories without them once no caller has given the model texts for
  `idle_s` seconds, embeds their sentences as background work (a small call: a write that
  arrives meanwhile waits for one short call at most), and stores them;
- `python -m app embed-sentences` does the same at once, for memories of any age.

Current versions only (what search reads), in batches by id: each batch read in one short
transaction, embedded with none open, and written in a second one; an interrupted run keeps
what it committed, and picks up the rows whose vectors are still
NULL (a partial index keeps that cheap, migration 0021). A memory of one sentence gets an
empty array, so it is not read again. A row is only written while still NULL, so two workers
(or a worker and the command) never overwrite each other; a new version written meanwhile is
a row of its own. Rows are locked only after the model call, and a row a write holds is
skipped (`SKIP LOCKED`) and left for a later batch: the background never waits behind a
user's write, nor deadlocks with one that locks several of the user's memories (a delete of
many).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Select, func, literal, select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.db.models import Memory
from app.memories.sentences import sentence_texts
from app.ml.embedder import Embedder
from app.ml.scheduling.work import Work, WorkClass

# /ready counts the backlog up to this many.
PENDING_CAP = 10_000

_PENDING = (Memory.is_current, Memory.sentence_embeddings_768d.is_(None))


@dataclass(slots=True)
class BackfillReport:
    memories: int = 0  # memories given their sentence vectors (or their empty array)
    sentences: int = 0  # sentence vectors embedded


async def pending_sentences(session: AsyncSession, cap: int = PENDING_CAP) -> int:
    """How many current memories still wait for their sentence vectors (at most `cap`)."""
    waiting = select(literal(1)).where(*_PENDING).limit(cap).subquery()
    return int((await session.execute(select(func.count()).select_from(waiting))).scalar_one())


def next_batch(
    columns: Sequence[Any],
    pending: Sequence[Any],
    user_id: str | None,
    after: uuid.UUID | None,
    size: int,
) -> Select[Any]:
    """A backfill's next batch: `size` rows still `pending` (of one user, or all), by id after
    the last batch's."""
    query = select(*columns).where(*pending).order_by(Memory.id).limit(size)
    if user_id is not None:
        query = query.where(Memory.user_id == user_id)
    if after is not None:
        query = query.where(Memory.id > after)
    return query


async def _lock_still_pending(session: AsyncSession, ids: list[uuid.UUID]) -> list[uuid.UUID]:
    """Of these memories, those still without sentence vectors, locked in id order; a row a
    write holds is skipped, not waited for (it stays NULL and a later batch takes it), so
    background work never waits behind, nor deadlocks with, a user's writes."""
    locked = (
        select(Memory.id)
        .where(Memory.id.in_(ids), Memory.sentence_embeddings_768d.is_(None))
        .order_by(Memory.id)
        .with_for_update(skip_locked=True)
    )
    return list((await session.execute(locked)).scalars())


async def embed_missing_sentences(
    sessionmaker: async_sessionmaker[AsyncSession],
    embedder: Embedder,
    user_id: str | None = None,
    batch_size: int = 200,
    progress: Callable[[BackfillReport], None] | None = None,
    max_batches: int | None = None,
    background: bool = False,
) -> BackfillReport:
    """Give the current memories (of one user, or all) without sentence vectors their own,
    `batch_size` at a time, for at most `max_batches` batches (None: until none is left)."""
    report = BackfillReport()
    after: uuid.UUID | None = None
    batches = 0
    work = Work(WorkClass.BACKGROUND if background else WorkClass.BULK)
    while max_batches is None or batches < max_batches:
        # Three steps, the model call between two short transactions (never inside one: a
        # session idle in a transaction pins the vacuum horizon and queues any ALTER TABLE).
        async with sessionmaker() as session, session.begin():
            query = next_batch(
                (Memory.id, Memory.content, Memory.speaker), _PENDING, user_id, after, batch_size
            )
            rows = (await session.execute(query)).all()
        if not rows:
            break
        texts = [sentence_texts(row.content, row.speaker) for row in rows]
        flat = [text for sentences in texts for text in sentences]
        embedded = iter(await embedder.embed(flat, work) if flat else [])
        vectors = {
            row.id: [next(embedded).full for _ in sentences]
            for row, sentences in zip(rows, texts, strict=True)
        }
        async with sessionmaker() as session, session.begin():
            writable = await _lock_still_pending(session, list(vectors))
            for memory_id in writable:
                await session.execute(
                    update(Memory)
                    .where(Memory.id == memory_id)
                    .values(sentence_embeddings_768d=vectors[memory_id])
                )
        after = rows[-1].id
        batches += 1
        report.memories += len(writable)
        report.sentences += sum(len(vectors[memory_id]) for memory_id in writable)
        if progress is not None:
            progress(report)
    return report
