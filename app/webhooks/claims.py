"""The dispatcher's SQL: claiming due deliveries fairly across tenants, and recording one
delivery's attempt. Both are short transactions: no row lock is held while a POST is in
flight, so an erase of the user (which deletes the user's deliveries) never waits for a
receiver.

A claim is a lease, not a lock: the claimed rows stay `pending` with `next_attempt_at` moved
past the POST's deadline, so no other dispatcher sees them due meanwhile, and a dispatcher
that dies mid-POST leaves them due again when the lease ends (at-least-once). The lease's
end is the claim's token: the outcome is written only where it is still the row's, so a
redelivery requested meanwhile, or a lease run out, is never overwritten by a late answer."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

# Due deliveries ranked within their tenant (the first of each tenant, then the second of
# each...), each tenant limited to its free slots: one tenant's backlog or slow receiver
# cannot take the claim from another's. Per subscription and user, a delivery waits while
# an earlier one is pending (leased ones included), so a receiver sees one user's events in
# order. The ranking reads without locks; the lock (SKIP LOCKED) re-checks that the row is
# still due, so two dispatchers never claim one delivery.
_CLAIM = text(
    """
    WITH due AS (
        SELECT d.id, d.tenant_id,
               row_number() OVER (PARTITION BY d.tenant_id ORDER BY d.id) AS tenant_rank
        FROM webhook_deliveries AS d
        WHERE d.status = 'pending' AND d.next_attempt_at <= now()
          AND NOT EXISTS (
            SELECT 1 FROM webhook_deliveries AS e
            WHERE e.subscription_id = d.subscription_id AND e.user_id = d.user_id
              AND e.status = 'pending' AND e.id < d.id
          )
    ), busy AS (
        SELECT * FROM unnest(CAST(:busy_tenants AS uuid[]), CAST(:busy_counts AS int[]))
            AS b(tenant_id, in_flight)
    ), chosen AS (
        SELECT due.id FROM due LEFT JOIN busy USING (tenant_id)
        WHERE due.tenant_rank <= :per_tenant - coalesce(busy.in_flight, 0)
        ORDER BY due.tenant_rank, due.id
        LIMIT :limit
    ), locked AS (
        SELECT w.id FROM webhook_deliveries AS w
        WHERE w.id IN (SELECT id FROM chosen)
          AND w.status = 'pending' AND w.next_attempt_at <= now()
        FOR UPDATE SKIP LOCKED
    )
    UPDATE webhook_deliveries AS d
    SET next_attempt_at = clock_timestamp() + make_interval(secs => :lease_s)
    FROM webhook_subscriptions AS s
    WHERE d.id IN (SELECT id FROM locked) AND s.id = d.subscription_id
    RETURNING d.id, d.tenant_id, d.event_id, d.type, d.created_at, d.payload, d.attempts,
              d.next_attempt_at AS lease, s.url, s.secret
    """
)

# The attempt logged only while its delivery exists: an erase may have deleted it meanwhile.
_LOG_ATTEMPT = text(
    """
    INSERT INTO webhook_attempts (tenant_id, delivery_id, status_code, error, duration_ms)
    SELECT d.tenant_id, d.id, :status_code, :error, :duration_ms
    FROM webhook_deliveries AS d WHERE d.id = :id
    """
)
_DELIVERED = text(
    """
    UPDATE webhook_deliveries
    SET status = 'delivered', attempts = attempts + 1, delivered_at = clock_timestamp()
    WHERE id = :id AND status = 'pending' AND next_attempt_at = :lease
    """
)
_FAILED = text(
    """
    UPDATE webhook_deliveries
    SET attempts = attempts + 1,
        status = CASE WHEN attempts + 1 >= :max_attempts THEN 'dead' ELSE 'pending' END,
        next_attempt_at = now() + make_interval(secs => :backoff_s)
    WHERE id = :id AND status = 'pending' AND next_attempt_at = :lease
    RETURNING status
    """
)


@dataclass(frozen=True, slots=True)
class ClaimedDelivery:
    """What one POST needs, read when it was claimed; `lease` is the claim's token."""

    id: int
    tenant_id: uuid.UUID
    event_id: uuid.UUID
    type: str
    created_at: datetime
    payload: object
    attempts: int
    lease: datetime
    url: str
    secret: str


async def claim_due(
    session: AsyncSession,
    *,
    limit: int,
    per_tenant: int,
    in_flight: dict[uuid.UUID, int],
    lease: timedelta,
) -> list[ClaimedDelivery]:
    """Lease up to `limit` due deliveries, at most `per_tenant` minus what is `in_flight` of
    each tenant, round-robin across tenants (oldest first within one)."""
    rows = await session.execute(
        _CLAIM,
        {
            "busy_tenants": list(in_flight),
            "busy_counts": list(in_flight.values()),
            "per_tenant": per_tenant,
            "limit": limit,
            "lease_s": lease.total_seconds(),
        },
    )
    return [ClaimedDelivery(**row._mapping) for row in rows]


async def record_attempt(
    session: AsyncSession,
    delivery: ClaimedDelivery,
    *,
    status_code: int | None,
    error: str | None,
    duration_ms: int,
    max_attempts: int,
    backoff: timedelta,
) -> str | None:
    """Log the attempt and write its outcome (where the lease is still this claim's): the
    delivery's status afterwards, or None when it is gone (erased) or claimed again."""
    await session.execute(
        _LOG_ATTEMPT,
        {"id": delivery.id, "status_code": status_code, "error": error, "duration_ms": duration_ms},
    )
    key = {"id": delivery.id, "lease": delivery.lease}
    if error is None:
        done = await session.execute(_DELIVERED, key)
        return "delivered" if done.rowcount else None  # type: ignore[attr-defined]
    failed = await session.execute(
        _FAILED, {**key, "max_attempts": max_attempts, "backoff_s": backoff.total_seconds()}
    )
    return failed.scalar_one_or_none()
