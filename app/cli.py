"""Command line: serve, relay, worker, reindex, import, admin, migrate, embed-serve, mcp."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING

import structlog

from app.config import get_settings
from app.logging import configure_logging
from app.tenants.cli import add_admin_commands

if TYPE_CHECKING:
    from app.runtime import Runtime

ROOT = Path(__file__).resolve().parent.parent
log = structlog.get_logger("cognis.cli")


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    settings = get_settings()
    uvicorn.run(
        "app.api.app:create_app",
        factory=True,
        host=args.host or settings.host,
        port=args.port or settings.port,
        log_level=settings.log_level.lower(),
        access_log=False,
    )
    return 0


def _embed_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from app.ml.embedding_server import create_embedding_app, standalone_settings

    settings = standalone_settings()
    if args.backend:
        settings = settings.model_copy(update={"embedding_backend": args.backend})
    uvicorn.run(
        create_embedding_app(settings),
        host=args.host,
        port=args.port,
        log_level=settings.log_level.lower(),
        access_log=False,
    )
    return 0


def _mcp(args: argparse.Namespace) -> int:
    from app.mcp_server.identity import McpSettings
    from app.mcp_server.tools import build_server

    server = build_server(McpSettings())
    if args.transport == "stdio":
        server.run("stdio")
    else:
        server.settings.host, server.settings.port = args.host, args.port
        server.run("streamable-http")
    return 0


def _llm_serve(args: argparse.Namespace) -> int:
    from app.llm.local_server import serve_gguf
    from app.ml.embedding_server import standalone_settings

    updates = {
        name: value
        for name, value in (
            ("llm_gguf_path", args.gguf),
            ("llm_local_port", args.port),
            ("llm_local_threads", args.threads),
        )
        if value is not None
    }
    return serve_gguf(standalone_settings().model_copy(update=updates))


def _with_runtime(body: Callable[[Runtime], Awaitable[int]]) -> int:
    """Run `body` with this process's runtime (the composition root), closed afterwards."""
    from app.runtime import Runtime

    async def run() -> int:
        runtime = Runtime.build(get_settings())
        try:
            return await body(runtime)
        finally:
            await runtime.close()

    return asyncio.run(run())


def _stop_on_signals() -> asyncio.Event:
    """An event set by SIGINT or SIGTERM: long-running loops finish their batch and stop."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    return stop


async def _check_background_role(runtime: Runtime) -> None:
    from app.db.roles import check_database_roles

    await check_database_roles(
        runtime.engine, runtime.background_engine, background=True, requests=False
    )


def _relay(args: argparse.Namespace) -> int:
    async def body(runtime: Runtime) -> int:
        await _check_background_role(runtime)
        if args.once:
            report = await runtime.relay.drain()
            print(f"delivered={report.delivered} failed={report.failed}")
            return 0 if report.failed == 0 else 1
        await runtime.relay.run_forever(_stop_on_signals())
        return 0

    return _with_runtime(body)


async def tenant_id_of(runtime: Runtime, ref: str) -> uuid.UUID:
    """A tenant's id from its id or name (a CognisError if there is none)."""
    from app.tenants.service import TenantAdmin

    async with runtime.sessionmaker() as session:
        return (await TenantAdmin(session).tenant(ref)).id


def _reindex(args: argparse.Namespace) -> int:
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

    return _with_runtime(body)


def _worker(args: argparse.Namespace) -> int:
    """Ingestion workers outside the API (scale-out); they share work through Postgres."""

    async def body(runtime: Runtime) -> int:
        await _check_background_role(runtime)
        await asyncio.to_thread(runtime.embedder.load)
        if args.once:
            processed = 0
            while await runtime.ingest_worker.run_once():
                processed += 1
            print(f"processed={processed}")
            return 0
        await runtime.ingest_worker.run_forever(_stop_on_signals())
        return 0

    return _with_runtime(body)


def _import(args: argparse.Namespace) -> int:
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
        runtime = Runtime.build(settings)
        try:
            act_as(await tenant_id_of(runtime, args.tenant) if args.tenant else DEFAULT_TENANT_ID)
            # Index DDL needs the tables' owner: the migration role, where one is configured.
            owner = runtime.engine
            if args.defer_index and settings.migration_database_url is not None:
                owner = create_engine(settings, settings.migration_database_url.get_secret_value())
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


def _migrate(args: argparse.Namespace) -> int:
    from alembic import command
    from alembic.config import Config

    command.upgrade(Config(str(ROOT / "alembic.ini")), args.revision)
    return 0


def _positive(value: str) -> int:
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return number


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="cognis", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the REST API (with the outbox relay inside)")
    serve.add_argument("--host")
    serve.add_argument("--port", type=int)
    serve.set_defaults(func=_serve)
    relay = commands.add_parser("relay", help="run the outbox relay on its own (scale-out)")
    relay.add_argument("--once", action="store_true", help="deliver what is due, then exit")
    relay.set_defaults(func=_relay)
    reindex = commands.add_parser("reindex", help="rebuild the OpenSearch index from Postgres")
    reindex.add_argument("--tenant", help="only this tenant's memories (id or name)")
    reindex.add_argument("--user", help="only this user's memories (with --tenant)")
    reindex.add_argument("--recreate", action="store_true", help="drop and recreate the index")
    reindex.set_defaults(func=_reindex)
    worker = commands.add_parser("worker", help="run ingestion workers on their own (scale-out)")
    worker.add_argument("--once", action="store_true", help="process what is due, then exit")
    worker.set_defaults(func=_worker)
    bulk = commands.add_parser(
        "import",
        help="import a history file (JSON Lines, or mem0's export); reruns skip what is in",
    )
    bulk.add_argument("file", help="JSON Lines, or a JSON list of mem0 records")
    bulk.add_argument("--user", help="import every line as this user's (default: the lines')")
    bulk.add_argument("--tenant", help="the tenant to import into (id or name; default: default)")
    bulk.add_argument("--format", choices=["auto", "jsonl", "mem0"], default="auto")
    bulk.add_argument("--batch-size", type=_positive, default=500)
    bulk.add_argument(
        "--defer-index",
        action="store_true",
        help="drop the HNSW indexes for the load and rebuild them after (quiet deployments: "
        "vector searches scan exactly meanwhile)",
    )
    bulk.set_defaults(func=_import)
    add_admin_commands(commands)
    migrate = commands.add_parser("migrate", help="alembic upgrade")
    migrate.add_argument("revision", nargs="?", default="head")
    migrate.set_defaults(func=_migrate)
    embed_serve = commands.add_parser(
        "embed-serve", help="serve the embedding model over an OpenAI-compatible /v1/embeddings"
    )
    embed_serve.add_argument("--host", default="127.0.0.1")
    embed_serve.add_argument("--port", type=int, default=8080)
    embed_serve.add_argument(
        "--backend",
        choices=("torch", "onnx", "onnx-int8"),
        help="how to run the model (default: COGNIS_EMBEDDING_BACKEND)",
    )
    embed_serve.set_defaults(func=_embed_serve)
    mcp = commands.add_parser(
        "mcp", help="MCP server (stdio, or HTTP beside the API) calling the API (COGNIS_MCP_*)"
    )
    mcp.add_argument("--transport", choices=("stdio", "http"), default="stdio")
    mcp.add_argument("--host", default="127.0.0.1")
    mcp.add_argument("--port", type=int, default=8001)
    mcp.set_defaults(func=_mcp)
    llm_serve = commands.add_parser(
        "llm-serve", help="serve a local GGUF model over an OpenAI-compatible API (xllamacpp)"
    )
    llm_serve.add_argument("--gguf", help="the GGUF file (default: COGNIS_LLM_GGUF_PATH)")
    llm_serve.add_argument("--port", type=int, help="default: COGNIS_LLM_LOCAL_PORT")
    llm_serve.add_argument("--threads", type=_positive, help="default: COGNIS_LLM_LOCAL_THREADS")
    llm_serve.set_defaults(func=_llm_serve)
    args = parser.parse_args(argv)
    if args.command == "mcp":  # a thin API client: no database, no models
        configure_logging()
        return int(args.func(args))
    if args.command in ("embed-serve", "llm-serve"):
        from app.ml.embedding_server import standalone_settings

        settings = standalone_settings()  # needs no database URL
    else:
        settings = get_settings()
    configure_logging(settings.log_level, settings.log_json)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
