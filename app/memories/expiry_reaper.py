"""The expiry reaper: removes expired memories, every version, from both stores, in batches of
one transaction each, every COGNIS_EXPIRY_REAP_INTERVAL_S beside the outbox relay: the store's
own chore, as retention is the database's (app/db/retention.py). What counts as expired is
app/memories/expiry.py's.

The reaper is audited like an erase, not like a delete: a DELETE ends a version and keeps it
(history, the audit trail of ingestion); the reaper removes the rows physically and leaves one
`memory_expiries` row per memory (ids, counts, times; no content), a log line, and a
`memory.expired` webhook event (ids and times too) in the same transaction."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from typing import Any

import structlog
from sqlalchemy import insert, text
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.config import RelaySettings
from app.db.models import MemoryExpiry, OutboxEvent
from app.db.tenant import tenant_scope
from app.wakeup import sleep_until_woken
from app.webhooks import events as webhook_events

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class Reaped:
    """One reaper batch: the memories (chains) and versions removed, and the users skipped
    because a write of theirs held the user's lock (their turn comes at the next batch)."""

    memories: int = 0
    versions: int = 0
    users_busy: int = 0
    # The batch was full: more may be due.
    more: bool = False

    def __add__(self, other: Reaped) -> Reaped:
        return Reaped(
            self.memories + other.memories,
            self.versions + other.versions,
            self.users_busy + other.users_busy,
            other.more,
        )


# The oldest expired memories first, through memories_expires_at_idx.
_DUE_CHAINS = text(
    """
    SELECT DISTINCT tenant_id, user_id, chain_id FROM (
        SELECT tenant_id, user_id, chain_id FROM memories
        WHERE expires_at IS NOT NULL AND expires_at <= now()
        ORDER BY expires_at
        LIMIT :limit
    ) AS due
    """
)
# Each user exclusively, as an erase does, but only if free now: a user whose write is in
# flight (holding its row of user_locks) is skipped, never waited for. The rows are made first
# for users who have none yet (written before 0041_user_locks).
_MAKE_USER_ROWS = text(
    "INSERT INTO user_locks (tenant_id, user_id)"
    " SELECT * FROM unnest(CAST(:tenants AS uuid[]), CAST(:users AS text[]))"
    " ON CONFLICT DO NOTHING"
)
_TRY_LOCK_USERS = text(
    "SELECT tenant_id, user_id FROM user_locks"
    " WHERE (tenant_id, user_id) IN"
    " (SELECT * FROM unnest(CAST(:tenants AS uuid[]), CAST(:users AS text[])))"
    " FOR UPDATE SKIP LOCKED"
)
# Whole chains only (a version references the one it replaced), and only those still expired
# now that their users are locked: a PATCH that committed meanwhile may have cleared it.
_DELETE_CHAINS = text(
    """
    DELETE FROM memories AS m
    WHERE m.chain_id = ANY(CAST(:chains AS uuid[]))
      AND NOT EXISTS (
          SELECT 1 FROM memories AS k
          WHERE k.chain_id = m.chain_id AND (k.expires_at IS NULL OR k.expires_at > now())
      )
    RETURNING m.id, m.tenant_id, m.user_id, m.chain_id, m.expires_at
    """
)
# Their undelivered index events: a late one would put a document back. One a relay holds
# right now is left (SKIP LOCKED): it is delivered before this batch's deletions, which have
# later outbox ids and so win by external version.
_DROP_PENDING_INDEX_EVENTS = text(
    """
    DELETE FROM outbox WHERE id IN (
        SELECT id FROM outbox
        WHERE user_id = ANY(CAST(:users AS text[])) AND processed_at IS NULL
          AND op = 'index' AND memory_id = ANY(CAST(:ids AS uuid[]))
        FOR UPDATE SKIP LOCKED
    )
    """
)


async def reap_expired(session: AsyncSession, limit: int) -> Reaped:
    """One batch, in the caller's transaction (a background one, no tenant set: it sees every
    tenant): up to `limit` expired memories' chains removed from Postgres, their documents'
    deletions queued in the outbox, an audit row and a `memory.expired` webhook event each."""
    due = (await session.execute(_DUE_CHAINS, {"limit": limit})).all()
    if not due:
        return Reaped()
    keys = sorted({(row.tenant_id, row.user_id) for row in due})
    users = {"tenants": [k[0] for k in keys], "users": [k[1] for k in keys]}
    await session.execute(_MAKE_USER_ROWS, users)
    locked = {tuple(r) for r in (await session.execute(_TRY_LOCK_USERS, users)).all()}
    chains = [row.chain_id for row in due if (row.tenant_id, row.user_id) in locked]
    more = len(due) >= limit
    if not chains:
        return Reaped(users_busy=len(keys), more=more)
    removed = (await session.execute(_DELETE_CHAINS, {"chains": chains})).all()
    if removed:
        await session.execute(
            _DROP_PENDING_INDEX_EVENTS,
            {"users": sorted({r.user_id for r in removed}), "ids": [r.id for r in removed]},
        )
        await session.execute(
            insert(OutboxEvent),
            [
                {
                    "tenant_id": r.tenant_id,
                    "user_id": r.user_id,
                    "op": "delete_document",
                    "memory_id": r.id,
                }
                for r in removed
            ],
        )
        per_chain: dict[tuple[uuid.UUID, uuid.UUID], dict[str, Any]] = {}
        for r in removed:
            entry = per_chain.setdefault(
                (r.tenant_id, r.chain_id),
                {
                    "tenant_id": r.tenant_id,
                    "chain_id": r.chain_id,
                    "user_id": r.user_id,
                    "versions": 0,
                    "expires_at": r.expires_at,
                },
            )
            entry["versions"] += 1
        await session.execute(insert(MemoryExpiry), list(per_chain.values()))
        await webhook_events.queue(
            session,
            [
                webhook_events.memory_expired(
                    e["tenant_id"], e["user_id"], e["chain_id"], e["versions"], e["expires_at"]
                )
                for e in per_chain.values()
            ],
        )
    return Reaped(
        memories=len({(r.tenant_id, r.chain_id) for r in removed}),
        versions=len(removed),
        users_busy=len(set(keys) - locked),
        more=more,
    )


class ExpiryReaper:
    """Runs `reap_expired` in batches of its own transaction, every
    COGNIS_EXPIRY_REAP_INTERVAL_S, beside the outbox relay (app/runtime.py)."""

    def __init__(
        self, sessionmaker: async_sessionmaker[AsyncSession], relay: RelaySettings
    ) -> None:
        self._sessionmaker = sessionmaker
        self._relay = relay

    async def reap_once(self) -> Reaped:
        """One batch of at most COGNIS_EXPIRY_REAP_BATCH_SIZE memories, one transaction."""
        # No tenant bound, whoever calls: the background role then sees every tenant's rows.
        with tenant_scope(None):
            async with self._sessionmaker() as session, session.begin():
                reaped = await reap_expired(session, self._relay.expiry_reap_batch_size)
        if reaped.memories or reaped.users_busy:
            # Like an erase's `user.erased`: counts, never content.
            log.info(
                "memories.expired_reaped",
                memories=reaped.memories,
                versions=reaped.versions,
                users_busy=reaped.users_busy,
            )
        return reaped

    async def reap_due(self) -> Reaped:
        """Batches until one comes back short: every memory expired by now, bar busy users."""
        total = Reaped()
        while True:
            reaped = await self.reap_once()
            total += reaped
            # Done, or every user of a full batch busy: the rest waits for the next interval.
            if not reaped.more or reaped.memories == 0:
                return total

    async def run_forever(self, stop: asyncio.Event) -> None:
        """Until `stop` is set: reap what is due, then wait one interval (0: off)."""
        interval = self._relay.expiry_reap_interval_s
        if interval <= 0:
            return
        log.info("expiry.reaper_started", interval_s=interval)
        wake = asyncio.Event()  # nothing wakes it early: expiry is a matter of time
        while not stop.is_set():
            await sleep_until_woken(wake, stop, interval)
            if stop.is_set():
                break
            try:
                await self.reap_due()
            except Exception as exc:
                log.exception("expiry.reaper_error", error=str(exc))
        log.info("expiry.reaper_stopped")
