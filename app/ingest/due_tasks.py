"""The claim's queries over ingest_tasks, built once at import (building them per call cost
more than running them): which users' heads are due, and a user's open tasks after a head.
app/ingest/repository.py runs them."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Select, and_, bindparam, exists, func, or_, select, tuple_
from sqlalchemy.dialects.postgresql import UUID
from sqlalchemy.orm import aliased

from app.db.models import IngestTask

OPEN_STATES = ("queued", "running")


def _next_due_heads() -> Select[Any]:
    """The claim query, built once: building it per call cost more than running it; at most
    `heads` rows, one per user (only a user's head qualifies).

    Only the head of a (tenant, user) queue is eligible: its earliest open task, while no
    other task of that user is being worked on, so one user's messages apply in order.
    Among the heads, tenants take turns: the tenants after `after_tenant` (the last one this
    worker served) come first, then the rest, so a tenant with a large backlog never holds up
    another tenant's next message for more than one round. Within a tenant the oldest head goes
    first; a user whose batch was just applied goes to the back (`move_user_to_back`)."""
    task = aliased(IngestTask)
    earlier = aliased(IngestTask)
    busy = aliased(IngestTask)
    now = func.now()
    after_tenant = bindparam("after_tenant", type_=UUID(as_uuid=True))
    return (
        select(task)
        .where(
            task.queue == bindparam("queue"),
            task.available_at <= now,
            or_(
                task.state == "queued",
                and_(task.state == "running", task.lease_expires_at < now),
            ),
            ~exists().where(
                earlier.tenant_id == task.tenant_id,
                earlier.user_id == task.user_id,
                earlier.state.in_(OPEN_STATES),
                tuple_(earlier.sent_at, earlier.message_id) < tuple_(task.sent_at, task.message_id),
            ),
            ~exists().where(
                busy.tenant_id == task.tenant_id,
                busy.user_id == task.user_id,
                busy.state == "running",
                busy.lease_expires_at >= now,
                busy.message_id != task.message_id,
            ),
        )
        .order_by(
            # False (a tenant after the last one served) sorts first; no cursor: all alike.
            func.coalesce(task.tenant_id <= after_tenant, False),
            task.tenant_id,
            task.available_at,
        )
        .limit(bindparam("heads"))
        .with_for_update(skip_locked=True, of=task)
    )


def _user_open_tasks_after() -> Select[IngestTask, datetime]:
    """A user's open tasks after a given one, in apply order, locked in that order (the order
    the final write locks them in too, so the two never deadlock). The position is read from
    the head's row, not sent back: a timestamp's round trip need not compare equal."""
    head = aliased(IngestTask)
    position = (
        select(head.sent_at, head.message_id)
        .where(head.message_id == bindparam("message_id"))
        .scalar_subquery()
    )
    return (
        select(IngestTask, func.now())
        .where(
            IngestTask.tenant_id == bindparam("tenant_id"),
            IngestTask.user_id == bindparam("user_id"),
            IngestTask.state.in_(OPEN_STATES),
            tuple_(IngestTask.sent_at, IngestTask.message_id) > position,
        )
        .order_by(IngestTask.sent_at, IngestTask.message_id)
        .limit(bindparam("limit"))
        .with_for_update()
    )


NEXT_DUE_HEADS = _next_due_heads()
USER_OPEN_TASKS_AFTER = _user_open_tasks_after()
