"""Outbox rows: written in the caller's session, so they commit with the memory change."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Select, any_, bindparam, delete, exists, func, insert, select, true, update
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased

from app.db.models import Memory, OutboxEvent
from app.search_index.documents import memory_document
from app.webhooks import events as webhook_events

OUTBOX_CHANNEL = "cognis_outbox"


def index_event(memory: Memory) -> dict[str, Any]:
    """The outbox row of an `index` event: the memory version's document as it is now.
    Every writer (one memory at a time or a bulk import) builds its rows here."""
    event: dict[str, Any] = {
        "user_id": memory.user_id,
        "op": "index",
        "memory_id": memory.id,
        "payload": memory_document(memory),
    }
    if memory.tenant_id is not None:  # a stored row (reindex); new ones take the transaction's
        event["tenant_id"] = memory.tenant_id
    return event


def enqueue_index(
    session: AsyncSession, memories: list[Memory], *, webhooks: bool = True
) -> list[OutboxEvent]:
    """One `index` event per memory version, carrying the document as it is now; and, with
    `webhooks` (a change, not a reindex), the change's webhook events (app/webhooks/events.py),
    queued by the same transaction."""
    events = [OutboxEvent(**index_event(m)) for m in memories]
    if webhooks:
        webhook_events.stage(session.sync_session, memories)
    session.add_all(events)
    return events


async def enqueue_index_many(session: AsyncSession, memories: list[Memory]) -> None:
    """`enqueue_index` for thousands of versions: one multi-row INSERT, no ORM objects."""
    if memories:
        await session.execute(insert(OutboxEvent), [index_event(m) for m in memories])


def enqueue_erase(session: AsyncSession, user_id: str, hold_s: float) -> OutboxEvent:
    """Queue the OpenSearch erase. Background relays leave it alone for `hold_s` seconds so
    the erasing request can run it itself and report the count; after that they take over."""
    event = OutboxEvent(
        user_id=user_id,
        op="erase_user",
        payload={},
        next_attempt_at=func.now() + timedelta(seconds=hold_s),
    )
    session.add(event)
    return event


def _pending_events() -> Select[Any]:
    """Pending events, oldest first, that no pending erase of their user precedes. Built once:
    building the aliased select per batch cost more than running it."""
    earlier_erase = aliased(OutboxEvent)
    return (
        select(OutboxEvent)
        .where(
            OutboxEvent.processed_at.is_(None),
            # Per user, nothing overtakes a pending erase: a memory written after an erasure
            # must not be indexed first and then deleted by the older erase.
            ~exists().where(
                earlier_erase.op == "erase_user",
                earlier_erase.tenant_id == OutboxEvent.tenant_id,
                earlier_erase.user_id == OutboxEvent.user_id,
                earlier_erase.id < OutboxEvent.id,
                earlier_erase.processed_at.is_(None),
            ),
        )
        .order_by(OutboxEvent.id)
        .limit(bindparam("limit"))
        .with_for_update(skip_locked=True)
    )


_DUE_EVENTS = _pending_events().where(OutboxEvent.next_attempt_at <= func.now())
_GIVEN_EVENTS = _pending_events().where(
    OutboxEvent.id == any_(bindparam("ids", type_=ARRAY(OutboxEvent.id.type)))
)


async def claim_pending(
    session: AsyncSession, limit: int, ids: list[int] | None = None
) -> list[OutboxEvent]:
    """Lock a batch of due events, oldest first; other relays skip what this one holds.

    Given explicit ids, those events are claimed whether due or not (the caller asks now)."""
    if ids is None:
        rows = await session.scalars(_DUE_EVENTS, {"limit": limit})
    else:
        rows = await session.scalars(_GIVEN_EVENTS, {"limit": limit, "ids": ids})
    return list(rows.all())


async def mark_delivered(session: AsyncSession, events: list[OutboxEvent]) -> None:
    erase_ids = [e.id for e in events if e.op == "erase_user"]
    index_ids = [e.id for e in events if e.op != "erase_user"]
    if index_ids:
        await session.execute(
            update(OutboxEvent)
            .where(OutboxEvent.id.in_(index_ids))
            # The time of delivery (the bulk request has returned), not the transaction's
            # start: the index lag counts a delivery as unrefreshed from here.
            .values(processed_at=func.clock_timestamp(), last_error=None)
        )
    if erase_ids:
        # An erased user's tombstone is removed too: nothing of that user stays behind.
        await session.execute(delete(OutboxEvent).where(OutboxEvent.id.in_(erase_ids)))


async def mark_failed(
    session: AsyncSession, event: OutboxEvent, error: str, now: datetime, backoff: timedelta
) -> None:
    await session.execute(
        update(OutboxEvent)
        .where(OutboxEvent.id == event.id)
        .values(
            attempts=OutboxEvent.attempts + 1,
            last_error=error[:2000],
            next_attempt_at=now + backoff,
        )
    )


async def pending_count(session: AsyncSession) -> int:
    return int(
        await session.scalar(
            select(func.count()).select_from(OutboxEvent).where(OutboxEvent.processed_at.is_(None))
        )
        or 0
    )


@dataclass(frozen=True, slots=True)
class IndexLag:
    """How far OpenSearch is behind Postgres for one user: events not yet searchable there.
    `pending` counts both those not yet delivered and the `unrefreshed` ones: delivered, but
    maybe not yet made searchable by a refresh of the index."""

    pending: int
    unrefreshed: int
    oldest_pending_age_ms: float | None


async def user_index_lag(
    session: AsyncSession, user_id: str, refresh_window_s: float | None
) -> IndexLag:
    """One user's events not yet searchable, and the age of the oldest: those not delivered
    (outbox_user_pending_idx), and those delivered less than `refresh_window_s` ago
    (outbox_user_delivered_idx; None: every delivered one still kept, the index having no
    scheduled refresh)."""
    # The statement's own start, not now(): the caller's transaction may have begun earlier.
    undelivered = select(
        func.count().label("events"), func.min(OutboxEvent.created_at).label("oldest")
    ).where(OutboxEvent.user_id == user_id, OutboxEvent.processed_at.is_(None))
    unrefreshed = select(
        func.count().label("events"), func.min(OutboxEvent.created_at).label("oldest")
    ).where(OutboxEvent.user_id == user_id, OutboxEvent.processed_at.is_not(None))
    if refresh_window_s is not None:
        # statement_timestamp() is stable, so the planner reads its value and sees that few
        # events were delivered since: a scan of outbox_user_delivered_idx. The volatile
        # clock_timestamp() (in a subquery) left it guessing a third of the user's events,
        # and at 100,000 of them it scanned the whole outbox on every search (100 ms).
        since = func.statement_timestamp() - func.make_interval(0, 0, 0, 0, 0, 0, refresh_window_s)
        unrefreshed = unrefreshed.where(OutboxEvent.processed_at > since)
    waiting, delivered = undelivered.subquery(), unrefreshed.subquery()
    oldest = func.least(waiting.c.oldest, delivered.c.oldest)
    row = (
        await session.execute(
            select(
                waiting.c.events,
                delivered.c.events,
                func.extract("epoch", func.clock_timestamp() - oldest) * 1000,
            ).select_from(waiting.join(delivered, true()))  # one row each
        )
    ).one()
    age_ms = row[2]
    return IndexLag(
        pending=int(row[0]) + int(row[1]),
        unrefreshed=int(row[1]),
        oldest_pending_age_ms=None if age_ms is None else round(max(float(age_ms), 0.0), 3),
    )


async def user_pending_ids(
    session: AsyncSession, user_id: str, memory_ids: list[uuid.UUID] | None = None
) -> list[int]:
    """Ids of one user's undelivered index events, optionally only those of some memories.

    Erase events are left out: the erasing request runs its own (see enqueue_erase)."""
    query = select(OutboxEvent.id).where(
        OutboxEvent.user_id == user_id,
        OutboxEvent.processed_at.is_(None),
        OutboxEvent.op == "index",
    )
    if memory_ids is not None:
        query = query.where(OutboxEvent.memory_id.in_(memory_ids))
    return list((await session.scalars(query.order_by(OutboxEvent.id))).all())


async def undelivered(session: AsyncSession, ids: list[int]) -> list[int]:
    """Those of `ids` still waiting for delivery (delivered erases are deleted: gone counts)."""
    if not ids:
        return []
    query = select(OutboxEvent.id).where(
        OutboxEvent.id.in_(ids), OutboxEvent.processed_at.is_(None)
    )
    return list((await session.scalars(query)).all())
