"""Import orchestration: lines in batches, each embedded and classified in one call, then
written with COPY in its own transaction (so an interrupted import keeps what it committed
and a rerun skips it by external id)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterable, Callable
from dataclasses import dataclass, field

import numpy as np
import structlog
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.config import ApiSettings
from app.db.models import Memory
from app.db.tenant import current_tenant
from app.errors import UserErasedError
from app.imports.lines import (
    ImportDraft,
    LineError,
    LineFormat,
    LineRules,
    LineUsers,
    parse_line,
)
from app.imports.sources import OversizedLine, RawLine
from app.memories.bulk import BulkMemoryWriter
from app.memories.categories import choose_categories, unknown_categories, unknown_category_detail
from app.memories.drafts import embed_drafts, new_version
from app.memories.fields import check_user_id
from app.memories.user_lock import hold_for_write
from app.ml.categories import CategoryClassifier
from app.ml.embedder import Embedder, matryoshka
from app.ml.scheduling.work import Work, WorkClass

log = structlog.get_logger(__name__)

DEFAULT_BATCH_SIZE = 500
MAX_REPORTED_ERRORS = 100


@dataclass(slots=True)
class ImportSummary:
    """Counts so far; `errors` keeps the first MAX_REPORTED_ERRORS of `failed`."""

    lines: int = 0
    imported: int = 0
    skipped: int = 0
    failed: int = 0
    errors: list[LineError] = field(default_factory=list)

    def fail(self, error: LineError, lines: int = 1) -> None:
        self.failed += lines
        if len(self.errors) < MAX_REPORTED_ERRORS:
            self.errors.append(error)


@dataclass(frozen=True, slots=True)
class ImportOptions:
    user_id: str | None
    line_users: LineUsers = "must_match"
    line_format: LineFormat = "auto"
    batch_size: int = DEFAULT_BATCH_SIZE


class MemoryImporter:
    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        embedder: Embedder,
        classifier: CategoryClassifier,
        api: ApiSettings,
    ) -> None:
        self._sessionmaker = sessionmaker
        self._embedder = embedder
        self._classifier = classifier
        self._api = api

    async def run(
        self,
        lines: AsyncIterable[tuple[int, RawLine]],
        options: ImportOptions,
        progress: Callable[[ImportSummary], None] | None = None,
    ) -> ImportSummary:
        """Import every line; bad lines are reported, the good ones still land."""
        # When this write began, for every batch: a user erased while the import runs is
        # refused from then on, as any write in flight during an erase is.
        began = time.monotonic()
        if options.user_id is not None:
            check_user_id(options.user_id)
        if (only_user := _only_user(options)) is not None:
            # Refused as every other write of an erased user is (409), before reading a line.
            await self._refuse_if_erased(only_user, began)
        rules = LineRules(
            user_id=options.user_id,
            line_users=options.line_users,
            line_format=options.line_format,
            max_content_chars=self._api.max_content_chars,
            max_metadata_bytes=self._api.max_metadata_bytes,
        )
        summary = ImportSummary()
        # Bulk model work: behind searches and single writes, shared fairly with other tenants.
        work = Work(WorkClass.BULK, current_tenant(), options.user_id)
        batch: list[ImportDraft] = []
        # One batch is written while the next is read and prepared: Postgres and this
        # process work side by side.
        writing: asyncio.Task[None] | None = None
        try:
            async for number, raw in lines:
                summary.lines += 1
                if isinstance(raw, OversizedLine):
                    detail = f"line is {raw.size} bytes; at most {raw.limit} are allowed"
                    parsed: ImportDraft | LineError = LineError(number, None, detail)
                else:
                    parsed = parse_line(number, raw, rules)
                if isinstance(parsed, LineError):
                    summary.fail(parsed)
                    continue
                batch.append(parsed)
                if len(batch) >= options.batch_size:
                    memories = await self._prepare(batch, summary, work)
                    batch = []
                    if writing is not None:
                        await writing
                        if progress is not None:
                            progress(summary)
                    writing = asyncio.create_task(self._write(memories, summary, options, began))
            if batch:
                memories = await self._prepare(batch, summary, work)
                if writing is not None:
                    await writing
                writing = asyncio.create_task(self._write(memories, summary, options, began))
        finally:
            # Also when reading failed: what was prepared is committed, a rerun skips it.
            if writing is not None:
                await writing
        if progress is not None:
            progress(summary)
        log.info(
            "import.finished",
            lines=summary.lines,
            imported=summary.imported,
            skipped=summary.skipped,
            failed=summary.failed,
        )
        return summary

    async def _refuse_if_erased(self, user_id: str, began: float) -> None:
        async with self._sessionmaker() as session, session.begin():
            await hold_for_write(session, user_id, began)

    async def _prepare(
        self, batch: list[ImportDraft], summary: ImportSummary, work: Work
    ) -> list[tuple[int, Memory]]:
        """The batch's memories not imported yet (with their line numbers), embedded and
        categorised (slow CPU work, outside any transaction)."""
        fresh = await self._not_yet_imported(batch)
        summary.skipped += len(batch) - len(fresh)
        fresh = await self._with_known_categories(fresh, summary)
        if not fresh:
            return []
        given = [d for d in fresh if d.vector is not None]
        if given:
            # Given vectors are normalised, with their 256D prefix, exactly as the model's own.
            vectors = np.stack([d.vector for d in given])  # type: ignore[misc]
            for item, embedding in zip(given, matryoshka(vectors), strict=True):
                item.draft.embedding = embedding
        # The rest embedded together in one call; categories where none was given.
        await embed_drafts([d.draft for d in fresh], self._embedder, work)
        async with self._sessionmaker() as session:
            await choose_categories(session, self._classifier, [d.draft for d in fresh])
        return [(d.line, _memory(d)) for d in fresh]

    async def _with_known_categories(
        self, batch: list[ImportDraft], summary: ImportSummary
    ) -> list[ImportDraft]:
        """The lines whose category (when given) is a row of the table; the others failed,
        each with the same refusal POST /memories gives."""
        given = {d.draft.category for d in batch if d.draft.category is not None}
        if not given:
            return batch
        async with self._sessionmaker() as session:
            unknown = await unknown_categories(session, self._classifier, given)
        if not unknown:
            return batch
        known = await self._classifier.names()
        for item in batch:
            if item.draft.category in unknown:
                detail = unknown_category_detail(item.draft.category, known)
                summary.fail(LineError(item.line, "category", detail))
        return [d for d in batch if d.draft.category not in unknown]

    async def _write(
        self,
        lines: list[tuple[int, Memory]],
        summary: ImportSummary,
        options: ImportOptions,
        began: float,
    ) -> None:
        """One transaction: the memories and their outbox rows."""
        if not lines:
            return
        async with self._sessionmaker() as session, session.begin():
            memories = await self._writable(session, lines, summary, options, began)
            inserted = await BulkMemoryWriter(session).insert_new(memories) if memories else []
        summary.imported += len(inserted)
        # Imported by a concurrent run (or an earlier batch of this one) since the check.
        summary.skipped += len(memories) - len(inserted)

    async def _writable(
        self,
        session: AsyncSession,
        lines: list[tuple[int, Memory]],
        summary: ImportSummary,
        options: ImportOptions,
        began: float,
    ) -> list[Memory]:
        """The memories whose user may be written now (each user's write lock taken, in a
        fixed order). A user erased since the import began: a one-user import is refused as
        a whole (UserErasedError, 409); otherwise that user's lines fail, each with its
        number."""
        refused: dict[str, str] = {}
        for user_id in sorted({m.user_id for _, m in lines}):
            try:
                await hold_for_write(session, user_id, began)
            except UserErasedError as exc:
                if _only_user(options) is not None:
                    raise
                refused[user_id] = exc.detail
        for line, memory in lines:
            if memory.user_id in refused:
                summary.fail(LineError(line, "user_id", refused[memory.user_id]))
        return [m for _, m in lines if m.user_id not in refused]

    async def _not_yet_imported(self, batch: list[ImportDraft]) -> list[ImportDraft]:
        """Drop the lines already imported, and repeats of an external id within the batch
        (the first wins), before any embedding is spent on them."""
        async with self._sessionmaker() as session:
            known = await BulkMemoryWriter(session).existing_external_ids([d.key for d in batch])
        fresh = []
        for draft in batch:
            if draft.key not in known:
                known.add(draft.key)
                fresh.append(draft)
        return fresh


def _only_user(options: ImportOptions) -> str | None:
    """The user of every line, when the import is one user's (the endpoint, the CLI's
    --user); None when each line names its own."""
    return None if options.line_users == "use" else options.user_id


def _memory(item: ImportDraft) -> Memory:
    """Version 1 of a new chain, carrying the line's external id (created_at is set by the
    bulk writer to its transaction's time)."""
    memory = new_version(item.user_id, item.draft, None)
    memory.external_id = item.external_id
    return memory
