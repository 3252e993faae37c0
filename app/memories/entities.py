"""Entities: the named things a user's memories are about, found off the write path and
stored per user (0039, docs/entities.md).

A write stores its memory with `entities_at` NULL. `EntityWorker`, beside the ingestion
workers (COGNIS_ENTITIES), takes the next current versions still NULL once the embedding
model has been idle for a moment (the write path keeps the cores), runs the NER model over
them (app/ml/ner.py) in a thread with no transaction open (the batch is read in one short
transaction, written in another), and in that second transaction links each version to its
entities, creating or extending the user's entities; `python -m app extract-entities` does
the same at once. Rows are locked only after the model ran, and a row a write holds is
skipped (SKIP LOCKED) and left for a later batch, as the sentence worker does. The reads
(`EntityRepository`) are app/memories/entity_reads.py.

Aliases (`resolve`): a form of a name is the same thing as an entity of the same user and
type when it is that entity's name or one of its aliases (case-insensitively), or, for people,
when one is a single word that is the other's first word or a clipped beginning of it (at most
60 % of its letters) and no other person of the user fits: "Mel" and "Melanie", "Marie" and
"Marie Curie", not "Daniel" and "Danielle" (`short_form_of`). The entity keeps the longest form
as its name and the others as aliases. A short form that fits two people ("Dan": "Daniel",
"Danielle") joins neither.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import anyio
import structlog
from sqlalchemy import (
    func,
    literal,
    select,
    update,
)
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.db.models import Entity, Memory, MemoryEntity
from app.memories.entity_reads import EntityRepository  # the reads, where callers found them
from app.ml.ner import EntityRecognizer, Mention

__all__ = [
    "EntityRepository",
    "ExtractionReport",
    "Known",
    "extract_missing_entities",
    "pending_entities",
    "resolve",
    "short_form_of",
]

log = structlog.get_logger(__name__)
# A short form joins a longer name only from this many letters ("Al" stays apart).
MIN_SHORT_FORM = 3
SHORT_FORM_SHARE = 0.6

_PENDING = (Memory.is_current, Memory.entities_at.is_(None))


@dataclass(slots=True)
class Known:
    """An entity of the user as the resolver sees it (new ones have no id until written)."""

    name: str
    type: str
    aliases: list[str] = field(default_factory=list)
    id: uuid.UUID | None = None
    renamed_from: str | None = None  # the stored key, when a longer form took its name

    def forms(self) -> set[str]:
        return {self.name.lower(), *(a.lower() for a in self.aliases)}


def short_form_of(short: str, long: str) -> bool:
    """Whether `short` is a single word that is the first word of `long` (another name), or
    a clipped form of it: a beginning of at most SHORT_FORM_SHARE of its letters ("Mel" of
    "Melanie", not "Daniel" of "Danielle" nor "Carol" of "Caroline")."""
    if " " in short or len(short) < MIN_SHORT_FORM or short.lower() == long.lower():
        return False
    first = long.split()[0].lower()
    if first == short.lower():
        return True
    return first.startswith(short.lower()) and len(short) <= SHORT_FORM_SHARE * len(first)


def resolve(known: list[Known], mention: Mention) -> Known:
    """The entity `mention` names among `known` (the user's), extended or added in place."""
    form = mention.name.lower()
    same_type = [k for k in known if k.type == mention.type]
    for entity in same_type:
        if form in entity.forms():
            return entity
    if mention.type == "person":
        longer = [k for k in same_type if short_form_of(mention.name, k.name)]
        if len(longer) == 1:
            longer[0].aliases.append(mention.name)
            return longer[0]
        shorter = [k for k in same_type if short_form_of(k.name, mention.name)]
        if len(shorter) == 1 and not any(
            short_form_of(shorter[0].name, k.name) for k in same_type if k is not shorter[0]
        ):
            entity = shorter[0]
            if entity.renamed_from is None and entity.id is not None:
                entity.renamed_from = entity.name.lower()
            entity.aliases.append(entity.name)
            entity.name = mention.name
            return entity
    entity = Known(name=mention.name, type=mention.type)
    known.append(entity)
    return entity


@dataclass(slots=True)
class ExtractionReport:
    memories: int = 0  # versions read
    links: int = 0  # memory_entities rows written


async def pending_entities(session: AsyncSession, cap: int = 10_000) -> int:
    """How many current memories still wait for the entity worker (at most `cap`)."""
    waiting = select(literal(1)).where(*_PENDING).limit(cap).subquery()
    return int((await session.execute(select(func.count()).select_from(waiting))).scalar_one())


async def _known(session: AsyncSession, tenant_id: uuid.UUID, user_id: str) -> list[Known]:
    rows = await session.execute(
        select(Entity.id, Entity.name, Entity.type, Entity.aliases).where(
            Entity.tenant_id == tenant_id, Entity.user_id == user_id
        )
    )
    return [Known(name=r.name, type=r.type, aliases=list(r.aliases), id=r.id) for r in rows]


async def _store(
    session: AsyncSession,
    tenant_id: uuid.UUID,
    user_id: str,
    found: list[tuple[Any, list[Mention]]],
) -> int:
    """Resolve and write one user's mentions (rows with their mentions); returns links made."""
    known = await _known(session, tenant_id, user_id)
    links: list[tuple[Any, Known, str]] = []
    for row, mentions in found:
        for mention in mentions:
            links.append((row, resolve(known, mention), mention.name))
    seen: dict[int, tuple[datetime, datetime]] = {}
    for row, entity, _ in links:
        first, last = seen.get(id(entity), (row.created_at, row.created_at))
        seen[id(entity)] = (min(first, row.created_at), max(last, row.created_at))
    ids: dict[int, uuid.UUID] = {}
    for entity in {id(e): e for _, e, _ in links}.values():
        first, last = seen[id(entity)]
        values = {
            "name": entity.name,
            "key": entity.name.lower(),
            "aliases": sorted(set(entity.aliases), key=str.lower),
        }
        if entity.id is not None:
            await session.execute(
                update(Entity)
                .where(Entity.id == entity.id)
                .values(
                    **values,
                    first_seen=func.least(Entity.first_seen, first),
                    last_seen=func.greatest(Entity.last_seen, last),
                )
            )
            ids[id(entity)] = entity.id
            continue
        inserted = pg_insert(Entity).values(
            tenant_id=tenant_id,
            user_id=user_id,
            type=entity.type,
            first_seen=first,
            last_seen=last,
            **values,
        )
        statement = inserted.on_conflict_do_update(
            index_elements=[Entity.tenant_id, Entity.user_id, Entity.type, Entity.key],
            set_={
                "first_seen": func.least(Entity.first_seen, inserted.excluded.first_seen),
                "last_seen": func.greatest(Entity.last_seen, inserted.excluded.last_seen),
            },
        ).returning(Entity.id)
        entity.id = (await session.execute(statement)).scalar_one()
        ids[id(entity)] = entity.id
    rows = {
        (row.id, ids[id(entity)]): {
            "tenant_id": tenant_id,
            "memory_id": row.id,
            "entity_id": ids[id(entity)],
            "user_id": user_id,
            "mention": mention,
        }
        for row, entity, mention in links
    }
    if rows:
        await session.execute(
            pg_insert(MemoryEntity).values(list(rows.values())).on_conflict_do_nothing()
        )
    return len(rows)


async def extract_missing_entities(
    sessionmaker: async_sessionmaker[AsyncSession],
    recognizer: EntityRecognizer,
    user_id: str | None = None,
    batch_size: int = 200,
    progress: Callable[[ExtractionReport], None] | None = None,
    max_batches: int | None = None,
) -> ExtractionReport:
    """Read the current memories (of one user, or all) not yet read for entities,
    `batch_size` at a time, for at most `max_batches` batches (None: until none is left)."""
    report = ExtractionReport()
    after: uuid.UUID | None = None
    batches = 0
    while max_batches is None or batches < max_batches:
        # The NER model runs between two short transactions, never inside one.
        async with sessionmaker() as session, session.begin():
            query = (
                select(
                    Memory.id,
                    Memory.tenant_id,
                    Memory.user_id,
                    Memory.content,
                    Memory.language,
                    Memory.created_at,
                )
                .where(*_PENDING)
                .order_by(Memory.id)
                .limit(batch_size)
            )
            if user_id is not None:
                query = query.where(Memory.user_id == user_id)
            if after is not None:
                query = query.where(Memory.id > after)
            rows = (await session.execute(query)).all()
        if not rows:
            break
        texts = [row.content for row in rows]
        languages = [row.language for row in rows]
        mentions = await anyio.to_thread.run_sync(recognizer.extract, texts, languages)
        async with sessionmaker() as session, session.begin():
            locked = set(
                (
                    await session.execute(
                        select(Memory.id)
                        .where(Memory.id.in_([r.id for r in rows]), Memory.entities_at.is_(None))
                        .order_by(Memory.id)
                        .with_for_update(skip_locked=True)
                    )
                ).scalars()
            )
            by_user: dict[tuple[uuid.UUID, str], list[tuple[Any, list[Mention]]]] = {}
            for row, found in zip(rows, mentions, strict=True):
                if row.id in locked:
                    by_user.setdefault((row.tenant_id, row.user_id), []).append((row, found))
            for (tenant_id, owner), found_rows in sorted(by_user.items(), key=lambda i: i[0]):
                report.links += await _store(session, tenant_id, owner, found_rows)
            if locked:
                await session.execute(
                    update(Memory).where(Memory.id.in_(locked)).values(entities_at=func.now())
                )
        after = rows[-1].id
        batches += 1
        report.memories += len(locked)
        if progress is not None:
            progress(report)
    return report
