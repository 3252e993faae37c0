"""Erasing a user, or one agent's or run's part of a user: the paths that physically remove
rows (besides the expiry reaper), in both stores. The SQL of both erases lives here, under the
user's lock taken exclusively (app/memories/user_lock.py); the receipt says what it guarantees
(docs/architecture.md, "Erasing a user", "Erasing an agent or a run")."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import structlog
from sqlalchemy import ColumnElement, any_, bindparam, delete, func, or_, select, text
from sqlalchemy.dialects.postgresql import ARRAY, UUID
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.config import RelaySettings
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
from app.memories.fields import check_scope_id, check_user_id
from app.memories.user_lock import hold_for_erase
from app.search_index import outbox
from app.search_index.relay import OutboxRelay
from app.webhooks import events as webhook_events

log = structlog.get_logger(__name__)


# Every table with rows of a user, in the order an erase deletes them: what erasing a user
# removes from Postgres (its tombstone and `user.erased` webhook event are written after).
ERASED_TABLES: list[tuple[str, Any]] = [
    ("memories", Memory),
    ("messages", Message),
    ("outbox", OutboxEvent),
    # Stored idempotent responses: they repeat the user's memories and messages.
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
]


@dataclass(frozen=True, slots=True)
class ErasedWindow:
    erased_at: datetime
    # When the tombstone goes (the retention job deletes it): until then a write that began
    # before erased_at is refused. None: no tombstone (a scoped erase refuses no write).
    tombstone_until: datetime | None


async def erase_user(
    session: AsyncSession, user_id: str, tombstone_s: float
) -> tuple[dict[str, int], ErasedWindow]:
    """Physically delete every row of this user (the only path that removes rows), under
    the user's lock taken exclusively, and leave a tombstone (kept `tombstone_s` seconds)
    that refuses the user's writes begun before this erase."""
    await hold_for_erase(session, user_id)
    counts: dict[str, int] = {}
    for name, model in ERASED_TABLES:
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
    await hold_for_erase(session, user_id)
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


@dataclass(frozen=True, slots=True)
class Erasure:
    user_id: str
    postgres: dict[str, int]
    # Documents deleted from OpenSearch; None when it could not be reached (the committed
    # outbox event erases them later).
    opensearch_deleted: int | None
    window: ErasedWindow
    # A scoped erase's agent and/or run; both None: the whole user.
    agent_id: str | None = None
    run_id: str | None = None

    @property
    def guarantee(self) -> str:
        """What the receipt promises, in words (docs/architecture.md, "Erasing a user")."""
        if self.agent_id is not None or self.run_id is not None:
            return (
                "every memory (all its versions) and message of this agent or run whose write "
                "committed before erased_at is erased from Postgres, and from OpenSearch once "
                "opensearch_pending is false; the user's shared memories and other agents' and "
                "runs' stay; no write is refused: one committed after erased_at is kept"
            )
        return (
            "every write of this user that began before erased_at is erased from Postgres, "
            "and from OpenSearch once opensearch_pending is false, or, if it was still in "
            "flight, refused with 409 and leaves nothing; a write that began after erased_at, "
            "so any write sent after this response, is accepted"
        )

    @property
    def erased_at(self) -> datetime:
        return self.window.erased_at


class UserEraser:
    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        relay: OutboxRelay,
        relay_settings: RelaySettings,
    ) -> None:
        self._sessionmaker = sessionmaker
        self._relay = relay
        self._relay_settings = relay_settings

    async def erase(self, user_id: str) -> Erasure:
        """Remove every row of the user and queue the OpenSearch erase in one transaction of its
        own, committed before OpenSearch is touched; then run that erase event at once."""
        check_user_id(user_id)
        async with self._sessionmaker() as session, session.begin():
            counts, window = await erase_user(
                session, user_id, self._relay_settings.erase_tombstone_s
            )
            event = outbox.enqueue_erase(
                session, user_id, hold_s=self._relay_settings.erase_handoff_s
            )
            await session.flush()
            event_id = event.id
        report = await self._relay.run_once(ids=[event_id])
        deleted = report.erased.get(user_id)
        log.info("user.erased", user_id=user_id, postgres=counts, opensearch_deleted=deleted)
        return Erasure(user_id=user_id, postgres=counts, opensearch_deleted=deleted, window=window)

    async def erase_scope(self, user_id: str, agent_id: str | None, run_id: str | None) -> Erasure:
        """Remove one agent's and/or one run's memories and messages of the user, queue their
        documents' deletions and write the audit row in one transaction; then deliver those
        deletions at once. No tombstone: the user's other writes wait for the transaction (the
        user's lock), none is refused after it (docs/architecture.md, "Erasing an agent or a
        run")."""
        check_user_id(user_id)
        agent_id = check_scope_id(agent_id, "agent_id")
        run_id = check_scope_id(run_id, "run_id")
        async with self._sessionmaker() as session, session.begin():
            erased = await erase_scope(
                session, user_id, agent_id, run_id, self._relay_settings.erase_handoff_s
            )
        events = erased.delete_events
        batch = max(self._relay_settings.relay_batch_size, 1)
        delivered = 0
        for start in range(0, len(events), batch):
            delivered += (await self._relay.run_once(ids=events[start : start + batch])).delivered
        deleted = delivered if delivered == len(events) else None
        # Like `user.erased`: ids and counts, never content.
        log.info(
            "user.scope_erased",
            user_id=user_id,
            agent_id=agent_id,
            run_id=run_id,
            memories=erased.memories,
            postgres=erased.counts,
            opensearch_deleted=deleted,
        )
        return Erasure(
            user_id=user_id,
            postgres=erased.counts,
            opensearch_deleted=deleted,
            window=ErasedWindow(erased_at=erased.erased_at, tombstone_until=None),
            agent_id=agent_id,
            run_id=run_id,
        )
