"""The per-user write lock: writers hold it shared, an erase exclusively, and a writer reads the
user's erase tombstone once it holds it, so no write that began before a user's erase survives
it, and every write that began after it is accepted (docs/architecture.md, "What an erase
guarantees under concurrent writes"). The erases themselves are app/memories/erasure.py."""

from __future__ import annotations

import time
from datetime import timedelta

from sqlalchemy import DateTime, func, select, text
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.engine import opened_at
from app.db.models import UserErasure
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


async def hold_for_erase(session: AsyncSession, user_id: str) -> None:
    """Take the user's lock exclusively, until commit: the writes of the user already in their
    transaction finish first, and none starts until this transaction ends (app/memories/
    erasure.py)."""
    await session.execute(_USER_ERASE_LOCK, {"key": _user_lock_key(user_id)})
