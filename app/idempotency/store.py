"""The idempotency_keys table: find a key's stored request, record a response in the write's
own transaction (expired rows are deleted by the retention job, app/db/retention.py). Every
query is by user: keys are per tenant (row-level security) and user."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import func, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import IdempotencyKey


@dataclass(frozen=True, slots=True)
class KeyedRequest:
    """A request sent with a key: who sent it, which key, and what it was."""

    user_id: str
    key: str
    route: str
    request_hash: bytes


@dataclass(frozen=True, slots=True)
class StoredRequest:
    """The first request with a key: its route and hash, and its response once `done`."""

    route: str
    request_hash: bytes
    state: str
    job_id: uuid.UUID | None
    response_status: int | None
    response_body: bytes | None
    age_s: float


async def find(session: AsyncSession, user_id: str, key: str) -> StoredRequest | None:
    """The unexpired row of this user's key, if any."""
    row = (
        await session.execute(
            select(
                IdempotencyKey.route,
                IdempotencyKey.request_hash,
                IdempotencyKey.state,
                IdempotencyKey.job_id,
                IdempotencyKey.response_status,
                IdempotencyKey.response_body,
                func.extract("epoch", func.now() - IdempotencyKey.created_at),
            ).where(
                IdempotencyKey.user_id == user_id,
                IdempotencyKey.key == key,
                IdempotencyKey.expires_at > func.now(),
            )
        )
    ).one_or_none()
    if row is None:
        return None
    return StoredRequest(*row[:6], age_s=float(row[6]))


async def record(
    session: AsyncSession,
    request: KeyedRequest,
    ttl_s: float,
    *,
    job_id: uuid.UUID | None = None,
    response: tuple[int, bytes] | None = None,
) -> bool:
    """Insert the key's row in the caller's transaction: `done` with its response, or
    `running` with its job. False: the key is taken (by a request that committed first; one
    still in its transaction makes this wait for its outcome). An expired row of the key, not
    yet purged, is taken over."""
    status, body = response if response is not None else (None, None)
    statement = pg_insert(IdempotencyKey).values(
        user_id=request.user_id,
        key=request.key,
        route=request.route,
        request_hash=request.request_hash,
        state="running" if response is None else "done",
        job_id=job_id,
        response_status=status,
        response_body=body,
        created_at=func.now(),
        expires_at=func.now() + timedelta(seconds=ttl_s),
    )
    replaced = {
        name: statement.excluded[name]
        for name in (
            "route",
            "request_hash",
            "state",
            "job_id",
            "response_status",
            "response_body",
            "created_at",
            "expires_at",
        )
    }
    upsert = statement.on_conflict_do_update(
        index_elements=[IdempotencyKey.tenant_id, IdempotencyKey.user_id, IdempotencyKey.key],
        set_=replaced,
        where=IdempotencyKey.expires_at <= func.now(),
    ).returning(IdempotencyKey.key)
    return (await session.execute(upsert)).first() is not None


async def complete(session: AsyncSession, request: KeyedRequest, status: int, body: bytes) -> None:
    """A `running` row (a message submission) gets the response it answered with."""
    await session.execute(
        update(IdempotencyKey)
        .where(
            IdempotencyKey.user_id == request.user_id,
            IdempotencyKey.key == request.key,
            IdempotencyKey.request_hash == request.request_hash,
            IdempotencyKey.state == "running",
        )
        .values(state="done", response_status=status, response_body=body)
    )
