"""Webhook events, queued in the transaction of the change they report (docs/webhooks.md).

A memory's version changes pass through the outbox's `enqueue_index`, which calls `stage`: the
events are noted on the session, and the flush that writes the versions queues them. The other
events (an expired memory reaped, an ingested message finished, a batch job finished, a user
erased) are queued by `queue` where that change is written. Either way one INSERT ... SELECT
writes one delivery per active subscription of the event's tenant that wants its type: a
tenant without subscriptions pays that one statement (an index probe that finds nothing).

The shapes of the events' `data` live here, one builder per type."""

from __future__ import annotations

import json
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import event, text
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Session, UOWTransaction

from app.db.models import BatchJob, IngestDecision, Memory
from app.vocabulary import OPERATIONS

EVENT_TYPES = (
    "memory.created",
    "memory.updated",
    "memory.deleted",
    "memory.expired",
    "message.processed",
    "batch_job.done",
    "user.erased",
)

_PENDING = "cognis_webhook_events"

# The event's tenant when it names one (work across tenants, on the background role, binds
# none), else the transaction's: an event never reaches another tenant's subscriptions.
FAN_OUT = text(
    """
    INSERT INTO webhook_deliveries (tenant_id, subscription_id, event_id, user_id, type, payload)
    SELECT s.tenant_id, s.id, e.event_id, e.user_id, e.type, e.payload
    FROM jsonb_to_recordset(CAST(:events AS jsonb))
        AS e(event_id uuid, tenant_id uuid, user_id text, type text, payload jsonb, n int)
    JOIN webhook_subscriptions AS s
        ON s.tenant_id = coalesce(e.tenant_id, cognis_tenant())
        AND s.active AND e.type = ANY(s.event_types)
    ORDER BY s.id, e.n
    """
)


@dataclass(frozen=True, slots=True)
class Event:
    type: str
    user_id: str
    data: dict[str, Any]
    # Work across tenants names the tenant; None: the transaction's (a request's, a worker's).
    tenant_id: uuid.UUID | None = None


def fan_out_parameters(events: Sequence[Event]) -> dict[str, str]:
    rows = [
        {
            "event_id": str(uuid.uuid4()),
            "tenant_id": str(e.tenant_id) if e.tenant_id is not None else None,
            "user_id": e.user_id,
            "type": e.type,
            "payload": e.data,
            "n": n,
        }
        for n, e in enumerate(events)
    ]
    return {"events": json.dumps(rows, default=str)}


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


# --- memory.created, memory.updated, memory.deleted: staged with the versions' outbox rows --


def memory_event_type(memory: Memory, batch: list[Memory]) -> str | None:
    """created (a first version), updated (a later version), deleted (a version ended with
    no successor in the same change); None for the ended half of an update."""
    if memory.is_current is not False and memory.superseded_at is None:
        return "memory.created" if memory.version == 1 else "memory.updated"
    successor = any(
        other is not memory and other.chain_id == memory.chain_id and other.version > memory.version
        for other in batch
    )
    return None if successor else "memory.deleted"


def memory_payload(memory: Memory) -> dict[str, Any]:
    return {
        "user_id": memory.user_id,
        "memory_id": str(memory.chain_id),
        "version_id": str(memory.id),
        "version": memory.version,
        "content": memory.content,
        "category": memory.category,
        "metadata": memory.metadata_ or {},
        "agent_id": memory.agent_id,
        "run_id": memory.run_id,
        "event_time": _iso(memory.event_time),
        "created_at": _iso(memory.created_at),
        "superseded_at": _iso(memory.superseded_at),
        "expires_at": _iso(memory.expires_at),
    }


def stage(session: Session, memories: list[Memory]) -> None:
    """Note the events of these version changes; the session's next flush queues them."""
    pending: list[Event] = session.info.setdefault(_PENDING, [])
    for memory in memories:
        kind = memory_event_type(memory, memories)
        if kind is not None:
            pending.append(Event(kind, memory.user_id, memory_payload(memory)))


@event.listens_for(Session, "after_flush")
def _queue_staged(session: Session, flush_context: UOWTransaction) -> None:
    pending = session.info.pop(_PENDING, None)
    if pending:
        # After the flush: the versions are written, so the deliveries follow them.
        session.connection().execute(FAN_OUT, fan_out_parameters(pending))


@event.listens_for(Session, "after_rollback")
def _drop_staged(session: Session) -> None:
    session.info.pop(_PENDING, None)


# --- the other events: queued where their change is written ----------------------------------


async def queue(session: AsyncSession, events: Sequence[Event]) -> None:
    """Queue these events in the caller's transaction, after everything the session holds
    (flushed first, so a message's memory events precede its `message.processed`)."""
    if not events:
        return
    await session.flush()
    staged: list[Event] = session.sync_session.info.pop(_PENDING, [])  # a flush that was clean
    await session.execute(FAN_OUT, fan_out_parameters([*staged, *events]))


def memory_expired(
    tenant_id: uuid.UUID, user_id: str, chain_id: uuid.UUID, versions: int, expires_at: datetime
) -> Event:
    """The reaper removed an expired memory, every version: ids and times, no content (the
    memory is gone; its event must not keep it)."""
    data = {
        "user_id": user_id,
        "memory_id": str(chain_id),
        "versions": versions,
        "expires_at": _iso(expires_at),
    }
    return Event("memory.expired", user_id, data, tenant_id)


def message_processed(
    user_id: str,
    message_id: uuid.UUID,
    job_id: uuid.UUID,
    decisions: Sequence[IngestDecision] = (),
    error: str | None = None,
) -> Event:
    """An ingestion task finished: `done` with its decisions (operations and the versions
    they wrote or named; the memory.* events of the same transaction carry the content), or
    `failed` for good with the error."""
    counts = Counter(d.operation for d in decisions)
    data = {
        "user_id": user_id,
        "message_id": str(message_id),
        "job_id": str(job_id),
        "status": "failed" if error is not None else "done",
        "error": error[:2000] if error is not None else None,
        "operations": {op: counts[op] for op in OPERATIONS},
        "decisions": [
            {
                "operation": d.operation,
                "version_id": str(d.memory_id) if d.memory_id else None,
                "target_version_id": str(d.target_memory_id) if d.target_memory_id else None,
                "category": d.category,
            }
            for d in decisions
        ],
    }
    return Event("message.processed", user_id, data)


def batch_job_done(job: BatchJob) -> Event:
    """A batch create answered 202 finished: done (the memories written, in batch order: the
    memory.created events of the same transaction carry them) or failed for good."""
    data = {
        "user_id": job.user_id,
        "job_id": str(job.id),
        "status": job.status,
        "memories": job.memories,
        "memory_ids": [str(i) for i in job.memory_ids or []],
        "attempts": job.attempts,
        "error": job.error,
        "created_at": _iso(job.created_at),
        "finished_at": _iso(job.finished_at),
    }
    return Event("batch_job.done", job.user_id, data, job.tenant_id)


def user_erased(user_id: str, erased_at: datetime, counts: dict[str, int]) -> Event:
    """Every row of the user was deleted: its time and counts, no content. Queued after the
    erase deleted the user's other deliveries, so it is the one left."""
    data = {
        "user_id": user_id,
        "erased_at": _iso(erased_at),
        "memory_versions": counts.get("memories", 0),
        "messages": counts.get("messages", 0),
    }
    return Event("user.erased", user_id, data)
