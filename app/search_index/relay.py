"""Outbox relay: moves committed memory changes into OpenSearch, at least once, in order.

Wakes on LISTEN/NOTIFY, polls as the fallback. Each batch is claimed with FOR UPDATE SKIP
LOCKED, so several relays can run side by side. Documents carry the outbox id as their
external version, so a replayed or late event never overwrites a newer state.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from itertools import groupby

import structlog
from opensearchpy.exceptions import TransportError
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.config import RelaySettings, StoreSettings
from app.db.models import OutboxEvent
from app.db.notifications import listening
from app.heartbeat import Beat
from app.search_index import outbox
from app.search_index.client import UNAVAILABLE, BulkOutcome, MemoryIndex
from app.search_index.documents import with_tenant
from app.wakeup import sleep_until_woken

log = structlog.get_logger(__name__)

# The action line each document carries in a bulk body (index name, id, version).
BULK_ACTION_BYTES = 160


@dataclass
class RelayReport:
    claimed: int = 0
    delivered: int = 0
    failed: int = 0
    erased: dict[str, int] = field(default_factory=dict)


class OutboxRelay:
    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        index: MemoryIndex,
        relay: RelaySettings,
        store: StoreSettings,
    ) -> None:
        self._sessionmaker = sessionmaker
        self._index = index
        self._relay = relay
        self._store = store
        self._wake = asyncio.Event()
        self._delivered = asyncio.Event()

    def backoff(self, attempts: int) -> timedelta:
        """Exponential backoff with jitter, capped."""
        base = self._relay.relay_backoff_base_s * (2 ** min(attempts, 20))
        capped = min(base, self._relay.relay_backoff_max_s)
        return timedelta(seconds=capped * random.uniform(0.5, 1.0))

    async def run_once(self, ids: list[int] | None = None) -> RelayReport:
        """Claim one batch of due events, deliver it, record the outcome. One transaction."""
        report = RelayReport()
        async with self._sessionmaker() as session, session.begin():
            events = await outbox.claim_pending(session, self._relay.relay_batch_size, ids)
            report.claimed = len(events)
            if not events:
                return report
            delivered, failures = await self._deliver(events, report)
            await outbox.mark_delivered(session, delivered)
            now = datetime.now(UTC)
            for event, error in failures:
                await outbox.mark_failed(session, event, error, now, self.backoff(event.attempts))
        report.delivered, report.failed = len(delivered), len(failures)
        if delivered:
            # Wake whoever waits for a delivery in this process (deliver_now), then re-arm.
            self._delivered.set()
            self._delivered = asyncio.Event()
        log.info(
            "outbox.batch_relayed",
            claimed=report.claimed,
            delivered=report.delivered,
            failed=report.failed,
        )
        return report

    async def _deliver(
        self, events: list[OutboxEvent], report: RelayReport
    ) -> tuple[list[OutboxEvent], list[tuple[OutboxEvent, str]]]:
        delivered: list[OutboxEvent] = []
        failures: list[tuple[OutboxEvent, str]] = []
        # Runs of index events (or of an expired memory's document deletions) go out as one
        # bulk request; an erase is its own step, in order.
        segments = [list(g) for _, g in groupby(events, key=lambda e: e.op)]
        for position, segment in enumerate(segments):
            try:
                # A HEAD per batch: a bulk write to a missing index would auto-create it with
                # a dynamic mapping, so the real mapping is put back first.
                await self._index.ensure_index()
                if segment[0].op == "erase_user":
                    for event in segment:
                        report.erased[event.user_id] = await self._index.delete_user_documents(
                            event.tenant_id, event.user_id
                        )
                        delivered.append(event)
                    continue
                if segment[0].op == "delete_document":
                    outcomes = await self._index.delete_documents(
                        [(str(e.memory_id), e.id) for e in segment]
                    )
                else:
                    outcomes = await self._bulk_index(segment)
                for event, outcome in zip(segment, outcomes, strict=True):
                    if outcome.ok:
                        delivered.append(event)
                    else:
                        failures.append((event, outcome.error or "unknown bulk error"))
            except (*UNAVAILABLE, TransportError) as exc:
                error = f"{type(exc).__name__}: {exc}"
                log.warning("outbox.delivery_failed", error=error)
                done = {id(e) for e in delivered}
                for rest in segments[position:]:
                    failures.extend((e, error) for e in rest if id(e) not in done)
                break
        return delivered, failures

    async def _bulk_index(self, events: list[OutboxEvent]) -> list[BulkOutcome]:
        """Index events as bulk requests bounded in documents and bytes, a few at a time:
        one huge request would hold the whole batch on one OpenSearch write thread."""
        relay = self._relay
        chunks: list[list[OutboxEvent]] = [[]]
        size = 0
        for event in events:
            event_bytes = len(json.dumps(event.payload, default=str)) + BULK_ACTION_BYTES
            full = len(chunks[-1]) >= relay.opensearch_bulk_max_docs
            if chunks[-1] and (full or size + event_bytes > relay.opensearch_bulk_max_bytes):
                chunks.append([])
                size = 0
            chunks[-1].append(event)
            size += event_bytes
        limiter = asyncio.Semaphore(max(relay.opensearch_bulk_concurrency, 1))

        async def send(chunk: list[OutboxEvent]) -> list[BulkOutcome]:
            async with limiter:
                return await self._index.bulk_index(
                    [(str(e.memory_id), e.id, with_tenant(e.payload, e.tenant_id)) for e in chunk]
                )

        results = await asyncio.gather(*(send(chunk) for chunk in chunks))
        return [outcome for chunk_outcomes in results for outcome in chunk_outcomes]

    async def deliver_now(self, ids: list[int], timeout_s: float) -> bool:
        """Read-your-writes: get these events into OpenSearch and searchable within
        `timeout_s`. True when all of them were delivered and the index refreshed.

        The caller delivers what it can itself, so a backlog of other users' events does not
        delay its own; events another relay holds (SKIP LOCKED) or that are in backoff are
        watched in the outbox until delivered, so a relay in another process counts too."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        remaining = list(ids)
        try:
            async with asyncio.timeout(timeout_s):
                for start in range(0, len(remaining), self._relay.relay_batch_size):
                    await self.run_once(remaining[start : start + self._relay.relay_batch_size])
        except TimeoutError:
            pass  # the events stay pending; the relay loop delivers them later
        except Exception as exc:
            log.warning("outbox.deliver_now_failed", error=str(exc))
        poll_s = self._relay.index_wait_poll_ms / 1000
        while True:
            async with self._sessionmaker() as session:
                remaining = await outbox.undelivered(session, remaining)
            left = deadline - loop.time()
            if not remaining:
                break
            if left <= 0:
                return False
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._delivered.wait(), timeout=min(poll_s, left))
        # Delivered is not yet searchable: a refresh makes it so now, not at the next interval.
        try:
            async with asyncio.timeout(max(deadline - loop.time(), 0.001)):
                await self._index.refresh()
        except (TimeoutError, *UNAVAILABLE, TransportError) as exc:
            log.warning("outbox.refresh_failed", error=str(exc))
            return False
        return True

    async def drain(self) -> RelayReport:
        """Deliver until no due event is left (events in backoff stay for later)."""
        total = RelayReport()
        while True:
            report = await self.run_once()
            total.claimed += report.claimed
            total.delivered += report.delivered
            total.failed += report.failed
            total.erased.update(report.erased)
            if report.claimed < self._relay.relay_batch_size or report.delivered == 0:
                return total

    async def run_forever(self, stop: asyncio.Event, beat: Beat | None = None) -> None:
        """The relay loop: until `stop` is set; `beat` (app/heartbeat.py) every time round, so
        a batch that never finishes stops it."""
        log.info("outbox.relay_started")
        try:
            async with listening(
                self._store,
                self._relay.relay_poll_interval_s,
                outbox.OUTBOX_CHANNEL,
                self._wake,
                "outbox",
            ):
                while not stop.is_set():
                    if beat is not None:
                        beat()
                    self._wake.clear()
                    try:
                        report = await self.run_once()
                    except Exception as exc:
                        log.exception("outbox.relay_error", error=str(exc))
                        report = RelayReport()
                    if report.claimed >= self._relay.relay_batch_size and report.delivered:
                        continue
                    await sleep_until_woken(self._wake, stop, self._relay.relay_poll_interval_s)
        finally:
            log.info("outbox.relay_stopped")


async def oldest_pending_age_s(session: AsyncSession) -> float | None:
    """Age in seconds of the oldest undelivered event (the relay's lag), or None if none."""
    oldest = await session.scalar(
        select(func.min(OutboxEvent.created_at)).where(OutboxEvent.processed_at.is_(None))
    )
    if oldest is None:
        return None
    return (datetime.now(UTC) - oldest).total_seconds()
