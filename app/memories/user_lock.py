"""The per-user write lock and the erase tombstone: no write that began before a user's erase
survives it, and every write that began after it is accepted (docs/architecture.md, "What an
erase guarantees under concurrent writes")."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, DateTime, any_, bindparam, delete, func, or_, select, text
from sqlalchemy.dialects.postgresql import ARRAY, UUID
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.engine import opened_at
from app.db.models import (
    BatchJob,
    Entity,
    IdempotencyKey,
    IngestDecision,
    IngestTask,
    Memory,
    MemoryExpiry,
    Message,
    OutboxEvent,
    ScopeErasure,
    UserErasure,
    WebhookDelivery,
)
from app.db.tenant import current_tenant
from app.errors import UserErasedError
from app.webhooks import events as webhook_events

# One lock per user, transaction-scoped: writers hold it shared, an erase exclusive. So an
# erase waits for the writes already in their transaction and no write starts during it.
_USER_WRITE_LOCK = text("SELECT pg_advisory_xact_lock_shared(hashtextextended(:key, 0))")
_USER_ERASE_LOCK = text("SELECT pg_advisory_xact_lock(hashtextextended(:key, 0))")


def _user_lock_key(user_id: str) -> str:
    return user_lock_key(current_tenant(), user_id)


def user_lock_key(tenant_id: object, user_id: str) -> str:
    """The advisory lock key of one user of one tenant (work across tenants names it)."""
    return f"cognis-user:{tenant_id}:{user_id}"


@dataclass(frozen=True, slots=True)
class ErasedWindow:
    erased_at: datetime
    # When the tombstone goes (the retention job deletes it): until then a write that began
    # before erased_at is refused. None: no tombstone (a scoped erase refuses no write).
    tombstone_until: datetime | None


async def hold_for_write(session: AsyncSession, user_id: str, began: float | None = None) -> None:
    """Before a transaction writes anything of the user: take the user's write lock (shared,
    until commit) and refuse with UserErasedError a write that began before the user's last
    erase (its tombstone's erased_at), so nothing in flight when the erase ran outlives it; a
    write that began after the erase is accepted, however soon.

    A write began when its session was opened (`began`, time.monotonic(), when the work spans
    several sessions, as an import does), in Postgres time: its clock read now minus the time
    elapsed since, taken after the answer, so the estimate is never later than the truth (a
    write within one round trip of an erase counts as before it). Without a stamped session,
    its transaction's start. The tombstone is read in a statement after the lock is granted,
    so under READ COMMITTED it sees an erase that committed while this transaction waited."""
    transaction = session.get_transaction()
    held = session.info.get("write_holds")
    if held is not None and held[0] is transaction and user_id in held[1]:
        return
    await session.execute(_USER_WRITE_LOCK, {"key": _user_lock_key(user_id)})
    if began is None:
        began = opened_at(session)
    erased = select(UserErasure.erased_at).where(UserErasure.user_id == user_id).scalar_subquery()
    instant = DateTime(timezone=True)
    row = (
        await session.execute(
            select(
                func.clock_timestamp(type_=instant),
                func.transaction_timestamp(type_=instant),
                erased,
            )
        )
    ).one()
    answered = time.monotonic()
    now, began_at, erased_at = row.tuple()
    if began is not None:
        began_at = min(began_at, now - timedelta(seconds=max(answered - began, 0.0)))
    if erased_at is not None and erased_at > began_at:
        raise UserErasedError(
            f"user {user_id} was erased at {erased_at.isoformat()}, after this write began: "
            "it is refused, so nothing in flight when the erase ran outlives it; a write "
            "sent now is accepted",
            erased_at=erased_at.isoformat(),
        )
    if held is None or held[0] is not transaction:
        held = (transaction, set[str]())
        session.info["write_holds"] = held
    held[1].add(user_id)


async def erase_user(
    session: AsyncSession, user_id: str, tombstone_s: float
) -> tuple[dict[str, int], ErasedWindow]:
    """Physically delete every row of this user (the only path that removes rows), under
    the user's lock taken exclusively, and leave a tombstone (kept `tombstone_s` seconds)
    that refuses the user's writes begun before this erase."""
    await session.execute(_USER_ERASE_LOCK, {"key": _user_lock_key(user_id)})
    counts: dict[str, int] = {}
    # Stored idempotent responses go too: they repeat the user's memories and messages.
    tables = (
        ("memories", Memory),
        ("messages", Message),
        ("outbox", OutboxEvent),
        ("idempotency_keys", IdempotencyKey),
        # The expiry reaper's and the scoped erases' audit rows name the user: they go too.
        ("memory_expiries", MemoryExpiry),
        ("scope_erasures", ScopeErasure),
        # Batch creates accepted (202) and not yet written, and the record of those done.
        ("batch_jobs", BatchJob),
        # Webhook events of the user not yet delivered (and the log of those that were); the
        # user.erased event is queued after this.
        ("webhook_deliveries", WebhookDelivery),
        # The named things of the user's memories (their links go with the memories).
        ("entities", Entity),
    )
    for name, model in tables:
        result = await session.execute(delete(model).where(model.user_id == user_id))
        counts[name] = int(result.rowcount or 0)  # type: ignore[attr-defined]
    # After every delete, under the exclusive lock: a write that began before this instant
    # either committed before the lock was granted (and is deleted above) or is refused.
    erased_at = func.clock_timestamp()
    until = erased_at + func.make_interval(0, 0, 0, 0, 0, 0, tombstone_s)
    statement = (
        pg_insert(UserErasure)
        .values(user_id=user_id, erased_at=erased_at, writes_refused_until=until)
        .on_conflict_do_update(
            index_elements=[UserErasure.tenant_id, UserErasure.user_id],
            set_={"erased_at": erased_at, "writes_refused_until": until},
        )
        .returning(UserErasure.erased_at, UserErasure.writes_refused_until)
    )
    row = (await session.execute(statement)).one()
    window = ErasedWindow(erased_at=row[0], tombstone_until=row[1])
    # After the user's deliveries were deleted above: this event is the one that stays.
    erased = webhook_events.user_erased(user_id, row[0], counts)
    await webhook_events.queue(session, [erased])
    return counts, window


@dataclass(frozen=True, slots=True)
class ScopeErased:
    """What a scoped erase removed from Postgres: row counts per table, the removed memory
    versions' ids, and the outbox events that delete their documents from OpenSearch."""

    counts: dict[str, int]
    memories: int  # chains
    version_ids: list[Any]
    delete_events: list[int]
    erased_at: datetime


def in_scope(columns: Any, agent_id: str | None, run_id: str | None) -> list[ColumnElement[bool]]:
    """SQL: the row belongs to this agent and/or run exactly (the shared ones, with no agent or
    no run, do not: unlike `visible_to`, which is what an agent sees)."""
    conditions: list[ColumnElement[bool]] = []
    if agent_id is not None:
        conditions.append(columns.agent_id == agent_id)
    if run_id is not None:
        conditions.append(columns.run_id == run_id)
    return conditions


# The uuids a stored idempotent response names (a memory's, a message's, a job's id).
_UUID_PATTERN = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
_DROP_STORED_RESPONSES = text(
    """
    DELETE FROM idempotency_keys AS k
    WHERE k.user_id = :user_id AND (
        CAST(k.job_id AS text) = ANY(CAST(:ids AS text[]))
        OR (k.response_body IS NOT NULL AND EXISTS (
            SELECT 1 FROM regexp_matches(
                convert_from(k.response_body, 'UTF8'), :pattern, 'g') AS found(uuid)
            WHERE found.uuid[1] = ANY(CAST(:ids AS text[]))
        ))
    )
    """
)
# One document deletion per removed version, held for the erasing request like a user
# erase's event (COGNIS_ERASE_HANDOFF_S): it runs them itself and reports the count.
_QUEUE_DELETIONS = text(
    """
    INSERT INTO outbox (user_id, op, memory_id, next_attempt_at)
    SELECT :user_id, 'delete_document', id, now() + make_interval(secs => :hold_s)
    FROM unnest(CAST(:ids AS uuid[])) AS id
    RETURNING id
    """
)
_IDS = bindparam("ids", type_=ARRAY(UUID(as_uuid=True)))


async def erase_scope(
    session: AsyncSession, user_id: str, agent_id: str | None, run_id: str | None, hold_s: float
) -> ScopeErased:
    """Physically delete one agent's and/or one run's memories (whole chains) and messages of
    a user, under the user's lock taken exclusively (in-flight writes of the user finish
    first; new ones wait for this transaction, none is refused afterwards: no tombstone).

    A chain is in the scope when its latest version is: a memory PATCHed into the shared ones
    is the user's now, history and all; one PATCHed into the agent is the agent's, its shared
    past included. Also removed: the messages' ingestion tasks and decisions (cascade), other
    decisions that wrote or targeted a removed version, the versions' outbox events (queued
    or delivered: they carry the content), and stored idempotent responses naming a removed
    memory, message or job. Queues one `delete_document` event per version and writes the
    `scope_erasures` audit row."""
    if agent_id is None and run_id is None:
        raise ValueError("a scoped erase names an agent, a run or both")
    await session.execute(_USER_ERASE_LOCK, {"key": _user_lock_key(user_id)})
    latest = (
        select(Memory.chain_id, Memory.agent_id, Memory.run_id)
        .where(
            Memory.user_id == user_id,
            Memory.chain_id.in_(
                select(Memory.chain_id).where(
                    Memory.user_id == user_id, *in_scope(Memory, agent_id, run_id)
                )
            ),
        )
        .distinct(Memory.chain_id)
        .order_by(Memory.chain_id, Memory.version.desc())
        .subquery()
    )
    chains = select(latest.c.chain_id).where(*in_scope(latest.c, agent_id, run_id))
    removed = (
        await session.execute(
            delete(Memory)
            .where(Memory.user_id == user_id, Memory.chain_id.in_(chains))
            .returning(Memory.id, Memory.chain_id)
        )
    ).all()
    version_ids = [row.id for row in removed]
    counts: dict[str, int] = {"memories": len(removed)}
    in_messages = select(Message.id).where(
        Message.user_id == user_id, *in_scope(Message, agent_id, run_id)
    )
    job_ids = list(
        (
            await session.scalars(
                select(IngestTask.job_id).where(IngestTask.message_id.in_(in_messages)).distinct()
            )
        ).all()
    )
    message_ids = list(
        (
            await session.scalars(
                delete(Message)
                .where(Message.user_id == user_id, *in_scope(Message, agent_id, run_id))
                .returning(Message.id)
            )
        ).all()
    )
    counts["messages"] = len(message_ids)
    result = await session.execute(
        delete(IngestDecision).where(
            IngestDecision.user_id == user_id,
            or_(
                IngestDecision.memory_id == any_(_IDS),
                IngestDecision.target_memory_id == any_(_IDS),
            ),
        ),
        {"ids": version_ids},
    )
    counts["ingest_decisions"] = int(result.rowcount or 0)  # type: ignore[attr-defined]
    # Waits for a relay delivering one of them: its document is indexed before the deletions,
    # which have later outbox ids and so win by external version.
    result = await session.execute(
        delete(OutboxEvent).where(
            OutboxEvent.user_id == user_id, OutboxEvent.memory_id == any_(_IDS)
        ),
        {"ids": version_ids},
    )
    counts["outbox"] = int(result.rowcount or 0)  # type: ignore[attr-defined]
    named = [str(i) for i in [*version_ids, *message_ids, *job_ids]]
    result = await session.execute(
        _DROP_STORED_RESPONSES, {"user_id": user_id, "ids": named, "pattern": _UUID_PATTERN}
    )
    counts["idempotency_keys"] = int(result.rowcount or 0)  # type: ignore[attr-defined]
    events = list(
        (
            await session.scalars(
                _QUEUE_DELETIONS, {"user_id": user_id, "ids": version_ids, "hold_s": hold_s}
            )
        ).all()
    )
    memories = len({row.chain_id for row in removed})
    erased_at = (
        await session.scalars(
            pg_insert(ScopeErasure)
            .values(
                user_id=user_id,
                agent_id=agent_id,
                run_id=run_id,
                memories=memories,
                versions=len(removed),
                messages=len(message_ids),
                erased_at=func.clock_timestamp(),
            )
            .returning(ScopeErasure.erased_at)
        )
    ).one()
    return ScopeErased(
        counts=counts,
        memories=memories,
        version_ids=version_ids,
        delete_events=events,
        erased_at=erased_at,
    )
