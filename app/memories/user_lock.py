"""The per-user write lock: writers hold it shared, an erase exclusively, and a writer reads the
user's erase tombstone once it holds it, so no write that began before a user's erase survives
it, and every write that began after it is accepted (docs/architecture.md, "What an erase
guarantees under concurrent writes"). The erases themselves are app/memories/erasure.py."""

from __future__ import annotations

import time
import uuid
from datetime import timedelta

from sqlalchemy import DateTime, func, select, text
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.engine import opened_at
from app.db.models import UserErasure
from app.db.tenant import current_tenant
from app.errors import UserErasedError

# One lock per user, transaction-scoped: a row of user_locks (0041), not an advisory lock, so
# that no role but the service's can take it (row locks need UPDATE on the table; any role may
# take any advisory lock). Writers hold it FOR KEY SHARE, an erase FOR UPDATE (it waits for the
# writes already in their transaction, and no write starts during it), the ingestion worker
# FOR NO KEY UPDATE (one worker per user at a time, beside the user's request writes).
_TENANT = "coalesce(CAST(:tenant AS uuid), cognis_tenant())"
_MAKE_ROW = text(
    f"INSERT INTO user_locks (tenant_id, user_id) VALUES ({_TENANT}, :user) "  # noqa: S608 (constant)
    "ON CONFLICT DO NOTHING"
)
LOCK_MODES = ("KEY SHARE", "UPDATE", "NO KEY UPDATE")
_LOCK_ROW = {
    mode: text(
        f"SELECT 1 FROM user_locks WHERE tenant_id = {_TENANT} AND user_id = :user FOR {mode}"  # noqa: S608 (constants)
    )
    for mode in LOCK_MODES
}


async def lock_user_row(
    session: AsyncSession, tenant_id: uuid.UUID | None, user_id: str, mode: str
) -> None:
    """Lock the user's row of user_locks in `mode` until the transaction ends, making the row
    on the user's first lock (`tenant_id` None: the transaction's tenant)."""
    params = {"tenant": tenant_id, "user": user_id}
    while (await session.execute(_LOCK_ROW[mode], params)).first() is None:
        # No row yet (or one deleted while this waited): make it, then lock it. Two first
        # writers of a user meet at the primary key, the second waiting for the first.
        await session.execute(_MAKE_ROW, params)


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
    await lock_user_row(session, current_tenant(), user_id, "KEY SHARE")
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
    await lock_user_row(session, current_tenant(), user_id, "UPDATE")
