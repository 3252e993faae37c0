"""The per-user write lock and the erase tombstone: no write that commits after a user's
erase survives it (docs/architecture.md, "What an erase guarantees under concurrent writes")."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, func, select, text
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import (
    IdempotencyKey,
    Memory,
    MemoryExpiry,
    Message,
    OutboxEvent,
    UserErasure,
)
from app.db.tenant import current_tenant
from app.errors import UserErasedError

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
    writes_refused_until: datetime


async def hold_for_write(session: AsyncSession, user_id: str) -> None:
    """Before a transaction writes anything of the user: take the user's write lock (shared,
    until commit) and refuse with UserErasedError while an erase's tombstone blocks writes.

    The tombstone is read in a statement after the lock is granted, so under READ
    COMMITTED it sees an erase that committed while this transaction waited for it."""
    transaction = session.get_transaction()
    held = session.info.get("write_holds")
    if held is not None and held[0] is transaction and user_id in held[1]:
        return
    await session.execute(_USER_WRITE_LOCK, {"key": _user_lock_key(user_id)})
    refused_until = await session.scalar(
        select(UserErasure.writes_refused_until).where(
            UserErasure.user_id == user_id,
            UserErasure.writes_refused_until > func.clock_timestamp(),
        )
    )
    if refused_until is not None:
        raise UserErasedError(
            f"user {user_id} was erased while this write was in flight or moments before; "
            f"writes to this user id are refused until {refused_until.isoformat()}",
            writes_refused_until=refused_until.isoformat(),
        )
    if held is None or held[0] is not transaction:
        held = (transaction, set[str]())
        session.info["write_holds"] = held
    held[1].add(user_id)


async def erase_user(
    session: AsyncSession, user_id: str, block_writes_s: float
) -> tuple[dict[str, int], ErasedWindow]:
    """Physically delete every row of this user (the only path that removes rows), under
    the user's lock taken exclusively, and leave a tombstone that refuses the user's
    writes for `block_writes_s` seconds after this transaction."""
    await session.execute(_USER_ERASE_LOCK, {"key": _user_lock_key(user_id)})
    counts: dict[str, int] = {}
    # Stored idempotent responses go too: they repeat the user's memories and messages.
    tables = (
        ("memories", Memory),
        ("messages", Message),
        ("outbox", OutboxEvent),
        ("idempotency_keys", IdempotencyKey),
        # The expiry reaper's audit rows name the user and its chains: they go too.
        ("memory_expiries", MemoryExpiry),
    )
    for name, model in tables:
        result = await session.execute(delete(model).where(model.user_id == user_id))
        counts[name] = int(result.rowcount or 0)  # type: ignore[attr-defined]
    erased_at = func.clock_timestamp()
    until = erased_at + func.make_interval(0, 0, 0, 0, 0, 0, block_writes_s)
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
    return counts, ErasedWindow(erased_at=row[0], writes_refused_until=row[1])
