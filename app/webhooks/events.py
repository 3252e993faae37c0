"""Webhook events, queued in the writer's transaction: `stage` (called by the outbox's
`enqueue_index`, the one place every memory version change passes) notes them on the session;
the flush that writes the versions inserts one delivery per active subscription of the
tenant that wants the type, in one INSERT ... SELECT. A tenant without subscriptions pays
that one statement (an index probe that finds nothing), nothing else."""

from __future__ import annotations

import json
import uuid
from typing import Any

from sqlalchemy import event, text
from sqlalchemy.orm import Session, UOWTransaction

from app.db.models import Memory

MEMORY_EVENTS = ("memory.created", "memory.updated", "memory.deleted")
EVENT_TYPES = (
    *MEMORY_EVENTS,
    "memory.expired",
    "message.processed",
    "batch_job.done",
    "user.erased",
)
# What subscriptions may ask for now: the types this version emits.
SUPPORTED_EVENTS = MEMORY_EVENTS

_PENDING = "cognis_webhook_events"

_FAN_OUT = text(
    """
    INSERT INTO webhook_deliveries (subscription_id, event_id, user_id, type, payload)
    SELECT s.id, e.event_id, e.user_id, e.type, e.payload
    FROM jsonb_to_recordset(CAST(:events AS jsonb))
        AS e(event_id uuid, user_id text, type text, payload jsonb, n int)
    JOIN webhook_subscriptions AS s ON s.active AND e.type = ANY(s.event_types)
    ORDER BY s.id, e.n
    """
)


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


def _iso(value: Any) -> str | None:
    return value.isoformat() if value is not None else None


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
    pending: list[dict[str, Any]] = session.info.setdefault(_PENDING, [])
    for memory in memories:
        kind = memory_event_type(memory, memories)
        if kind is not None:
            pending.append(
                {"user_id": memory.user_id, "type": kind, "payload": memory_payload(memory)}
            )


@event.listens_for(Session, "after_flush")
def _queue_staged(session: Session, flush_context: UOWTransaction) -> None:
    pending = session.info.pop(_PENDING, None)
    if not pending:
        return
    # After the flush: the versions are written, so the deliveries follow them.
    rows = [{**item, "event_id": str(uuid.uuid4()), "n": n} for n, item in enumerate(pending)]
    session.connection().execute(_FAN_OUT, {"events": json.dumps(rows, default=str)})


@event.listens_for(Session, "after_rollback")
def _drop_staged(session: Session) -> None:
    session.info.pop(_PENDING, None)
