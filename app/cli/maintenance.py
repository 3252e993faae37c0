"""Commands on the stores: rebuild the BM25 index, delete what retention allows, import and
export histories, migrate the schema."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from app.cli.processes import with_runtime
from app.config import get_settings

if TYPE_CHECKING:
    from app.runtime import Runtime

ROOT = Path(__file__).resolve().parents[2]


async def tenant_id_of(runtime: Runtime, ref: str) -> uuid.UUID:
    """A tenant's id from its id or name (a CognisError if there is none)."""
    from app.db.tenant import tenant_scope
    from app.tenants.service import TenantAdmin

    # The worker role with no tenant set: only it sees every tenant's row (0042).
    with tenant_scope(None):
        async with runtime.background_sessionmaker() as session:
            return (await TenantAdmin(session).tenant(ref)).id


def reindex(args: argparse.Namespace) -> int:
    from app.db.tenant import act_as
    from app.search_index.reindex import requeue_memories

    async def body(runtime: Runtime) -> int:
        if args.tenant is not None:  # only its rows: the background role, bound to it
            act_as(await tenant_id_of(runtime, args.tenant))
        index, relay = runtime.index, runtime.relay
        if args.recreate:
            await index.drop_index()
            print("dropped index", index.name, flush=True)
        await index.ensure_index()
        if await index.add_language_fields():
            print("added the language analyzers and fields to", index.name, flush=True)
        queued = await requeue_memories(
            runtime.background_sessionmaker,
            user_id=args.user,
            progress=lambda n: print(f"queued {n} memory versions", flush=True),
        )
        print(f"queued {queued} memory versions in all; delivering...", flush=True)
        delivered = failed = 0
        while True:
            report = await relay.run_once()
            delivered += report.delivered
            failed += report.failed
            if report.claimed:
                print(f"delivered {delivered} (failed {failed})", flush=True)
            if report.claimed == 0 or report.delivered == 0:
                break
        return 0 if failed == 0 else 1

    return with_runtime(body, "reindex")


def embed_sentences(args: argparse.Namespace) -> int:
    """Sentence vectors for memories written without them (app.memories.sentence_backfill)."""
    from app.db.tenant import act_as
    from app.memories.sentence_backfill import BackfillReport, embed_missing_sentences

    def show(report: BackfillReport) -> None:
        print(f"{report.memories} memories, {report.sentences} sentences embedded", flush=True)

    async def body(runtime: Runtime) -> int:
        if args.tenant is not None:  # only its rows: the background role, bound to it
            act_as(await tenant_id_of(runtime, args.tenant))
        report = await embed_missing_sentences(
            runtime.background_sessionmaker,
            runtime.embedder,
            user_id=args.user,
            batch_size=args.batch_size,
            progress=show,
        )
        print(f"done: {report.memories} memories, {report.sentences} sentence vectors", flush=True)
        return 0

    return with_runtime(body, "embed-sentences")


def extract_entities(args: argparse.Namespace) -> int:
    """Entities of current memories not yet read for them (app.memories.entities)."""
    from app.db.tenant import act_as
    from app.memories.entities import ExtractionReport, extract_missing_entities
    from app.ml.ner import EntityRecognizer

    def show(report: ExtractionReport) -> None:
        print(f"{report.memories} memories read, {report.links} links", flush=True)

    async def body(runtime: Runtime) -> int:
        if args.tenant is not None:  # only its rows: the background role, bound to it
            act_as(await tenant_id_of(runtime, args.tenant))
        report = await extract_missing_entities(
            runtime.background_sessionmaker,
            EntityRecognizer(),
            user_id=args.user,
            batch_size=args.batch_size,
            progress=show,
        )
        print(f"done: {report.memories} memories, {report.links} entity links", flush=True)
        return 0

    return with_runtime(body, "extract-entities")


def embed_multilingual(args: argparse.Namespace) -> int:
    """Multilingual vectors for current memories written without them
    (app.memories.multilingual_backfill)."""
    from app.db.tenant import act_as
    from app.memories.multilingual_backfill import embed_missing_multilingual
    from app.ml.multilingual import shared_encoder

    async def body(runtime: Runtime) -> int:
        if args.tenant is not None:  # only its rows: the background role, bound to it
            act_as(await tenant_id_of(runtime, args.tenant))
        done = await embed_missing_multilingual(
            runtime.background_sessionmaker,
            shared_encoder(),
            user_id=args.user,
            batch_size=args.batch_size,
            progress=lambda count: print(f"{count} memories embedded", flush=True),
        )
        print(f"done: {done} multilingual vectors", flush=True)
        return 0

    return with_runtime(body, "embed-multilingual")


def detect_languages(args: argparse.Namespace) -> int:
    """The language of memory versions stored before migration 0028 labelled them, when that
    migration left them to this command (app.memories.language_backfill)."""
    from app.db.tenant import act_as
    from app.memories.language_backfill import LanguageReport, detect_missing_languages

    started = time.monotonic()

    def progress(report: LanguageReport) -> None:
        rate = report.read / max(time.monotonic() - started, 1e-9)
        print(f"{report.read} versions read, {report.labelled} labelled ({rate:.0f}/s)", flush=True)

    async def body(runtime: Runtime) -> int:
        if args.tenant is not None:  # only its rows: the background role, bound to it
            act_as(await tenant_id_of(runtime, args.tenant))
        report = await detect_missing_languages(
            runtime.background_sessionmaker,
            user_id=args.user,
            batch_size=args.batch_size,
            progress=progress,
        )
        print(
            f"done: {report.labelled} of {report.read} versions labelled (the rest have no "
            f"letters) in {time.monotonic() - started:.0f} s",
            flush=True,
        )
        return 0

    return with_runtime(body, "detect-languages")


def requeue_messages(args: argparse.Namespace) -> int:
    """Failed ingestion tasks queued again (app.ingest.repository.requeue_failed): after an
    outage longer than COGNIS_INGEST_OUTAGE_MAX_AGE_S, or a fix for what failed them."""
    from app.db.tenant import act_as
    from app.ingest.repository import IngestRepository

    async def body(runtime: Runtime) -> int:
        if args.tenant is not None:  # only its rows: the background role, bound to it
            act_as(await tenant_id_of(runtime, args.tenant))
        async with runtime.background_sessionmaker() as session, session.begin():
            count = await IngestRepository(session).requeue_failed(args.queue, args.user)
        print(f"requeued {count} failed messages", flush=True)
        return 0

    return with_runtime(body, "requeue-messages")


def retention(args: argparse.Namespace) -> int:
    """One pass of the retention job (app/db/retention.py); with --dry-run, what it would
    delete."""

    async def body(runtime: Runtime) -> int:
        if args.dry_run:
            due = await runtime.retention.due()
            for table, rows in due.items():
                print(f"{table}: {rows} rows due", flush=True)
            return 0
        purged = await runtime.retention.run_once()
        for table, rows in purged.items():
            print(f"{table}: {rows} rows deleted", flush=True)
        return 0

    return with_runtime(body, "retention")


def import_history(args: argparse.Namespace) -> int:
    """Bulk import of a history file; see app.imports."""
    from app.errors import CognisError
    from app.imports.progress import ProgressReport, summary_json
    from app.imports.service import ImportOptions
    from app.imports.sources import file_lines
    from app.memories.fields import check_user_id
    from app.runtime import Runtime

    path = Path(args.file)
    if not path.is_file():
        print(f"no such file: {path}", file=sys.stderr)
        return 2

    async def body() -> int:
        from app.db.engine import create_engine
        from app.db.tenant import DEFAULT_TENANT_ID, act_as
        from app.db.vector_indexes import build_hnsw_indexes, drop_hnsw_indexes

        # SIGTERM stops the import as Ctrl-C does: batches committed stay, the one in flight
        # rolls back, and deferred indexes are rebuilt before the process ends.
        task = asyncio.current_task()
        assert task is not None
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
        settings = get_settings()
        runtime = Runtime.build(settings, "import")
        try:
            act_as(await tenant_id_of(runtime, args.tenant) if args.tenant else DEFAULT_TENANT_ID)
            # Index DDL needs the tables' owner: the migration role, where one is configured.
            owner = runtime.engine
            if args.defer_index and settings.store.migration_database_url is not None:
                owner = create_engine(
                    settings.store,
                    settings.store.migration_database_url.get_secret_value(),
                    application="cognis-import-owner",
                )
            if args.defer_index:
                print("dropping the HNSW indexes of memories for the load", file=sys.stderr)
                await drop_hnsw_indexes(owner)
            try:
                summary = await runtime.importer.run(
                    file_lines(path),
                    ImportOptions(
                        user_id=args.user,
                        line_users="use" if args.user is None else "ignore",
                        line_format=args.format,
                        batch_size=args.batch_size,
                    ),
                    progress=report.update,
                )
            finally:
                if args.defer_index:
                    print("rebuilding the HNSW indexes ...", file=sys.stderr, flush=True)
                    await build_hnsw_indexes(owner, on_built=report.index_built)
                    if owner is not runtime.engine:
                        await owner.dispose()
        finally:
            await runtime.close()
        report.finish(summary)
        print(summary_json(summary))
        return 0 if summary.failed == 0 else 1

    report = ProgressReport(sys.stderr)
    try:
        if args.user is not None:
            check_user_id(args.user)
        return asyncio.run(body())
    except CognisError as exc:
        print(f"cannot import {path}: {exc.detail}", file=sys.stderr)
        return 2
    except (KeyboardInterrupt, asyncio.CancelledError):
        report.interrupted()
        return 130


def export_history(args: argparse.Namespace) -> int:
    """A user's memories as JSON Lines (the import's line format); see app.imports.export."""
    from app.db.tenant import DEFAULT_TENANT_ID
    from app.errors import CognisError
    from app.imports.export import ExportOptions, export_lines
    from app.memories.fields import check_user_id
    from app.memories.filters import listing_filter, to_sql
    from app.runtime import Runtime

    async def body(out: BinaryIO) -> int:
        runtime = Runtime.build(get_settings(), "export")
        count = 0
        try:
            tenant = await tenant_id_of(runtime, args.tenant) if args.tenant else DEFAULT_TENANT_ID
            options = ExportOptions(
                versions=args.versions,
                vectors=args.vectors,
                where=to_sql(matching) if matching is not None else None,
            )
            async for line in export_lines(runtime.sessionmaker, tenant, args.user, options):
                out.write(line)
                count += 1
            out.flush()
        finally:
            await runtime.close()
        print(f"exported {count} lines", file=sys.stderr)
        return 0

    try:
        check_user_id(args.user)
        matching = listing_filter(
            args.filters, args.agent, args.run, ("--filters", "--agent", "--run")
        )
        if args.output is None:
            return asyncio.run(body(sys.stdout.buffer))
        with Path(args.output).open("wb") as out:
            return asyncio.run(body(out))
    except CognisError as exc:
        print(f"cannot export {args.user}: {exc.detail}", file=sys.stderr)
        return 2


def migrate(args: argparse.Namespace) -> int:
    from alembic import command
    from alembic.config import Config
    from alembic.util import CommandError

    try:
        command.upgrade(Config(str(ROOT / "alembic.ini")), args.revision)
    except CommandError as exc:  # a timeout's "rerun", as `alembic` itself prints it
        print(f"FAILED: {exc}", file=sys.stderr)
        return 1
    return 0


def backup(args: argparse.Namespace) -> int:
    """Dump the database whole, checked (app/db/backup.py)."""
    from app.db.backup import BackupError, dump

    settings = get_settings()
    url = args.database_url or (
        settings.store.backup_database_url.get_secret_value()
        if settings.store.backup_database_url
        else None
    )
    if url is None:
        print(
            "no backup role: set COGNIS_BACKUP_DATABASE_URL (a role with BYPASSRLS and "
            "pg_read_all_data; docs/operations.md) or pass --database-url",
            file=sys.stderr,
        )
        return 2
    args.file.parent.mkdir(parents=True, exist_ok=True)
    try:
        asyncio.run(dump(url, args.file, lambda line: print(line, flush=True)))
    except BackupError as exc:
        print(f"FAILED: {exc}", file=sys.stderr)
        return 1
    return 0


def restore(args: argparse.Namespace) -> int:
    """Restore a dump into a new database, checked against its counts (app/db/backup.py)."""
    from sqlalchemy.engine import make_url

    from app.db.backup import BackupError, create_database
    from app.db.backup import restore as restore_dump

    settings = get_settings()
    owner = (
        settings.store.migration_database_url or settings.store.database_url
    ).get_secret_value()
    target = make_url(owner).set(database=args.into).render_as_string(hide_password=False)
    try:
        asyncio.run(create_database(owner, args.into))
        asyncio.run(restore_dump(target, args.file, lambda line: print(line, flush=True)))
    except BackupError as exc:
        print(f"FAILED: {exc}", file=sys.stderr)
        return 1
    print(
        f"next: point COGNIS_*DATABASE_URL at database {args.into}, then rebuild the BM25 "
        "index from it: python -m app reindex --recreate",
        flush=True,
    )
    return 0
