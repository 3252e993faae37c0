"""The long-running processes: the API, the outbox relay, ingestion workers, the embedding and
LLM servers, the MCP server; and how a command runs with this process's runtime."""

from __future__ import annotations

import argparse
import asyncio
import signal
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from app.config import get_settings

if TYPE_CHECKING:
    from app.runtime import Runtime


def with_runtime(body: Callable[[Runtime], Awaitable[int]], process: str) -> int:
    """Run `body` with this process's runtime (the composition root), closed afterwards;
    `process` names its connections in pg_stat_activity (`cognis-<process>`)."""
    from app.runtime import Runtime

    async def run() -> int:
        runtime = Runtime.build(get_settings(), process)
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


def serve(args: argparse.Namespace) -> int:
    import uvicorn

    settings = get_settings()
    uvicorn.run(
        "app.asgi:create_app",
        factory=True,
        host=args.host or settings.api.host,
        port=args.port or settings.api.port,
        log_level=settings.api.log_level.lower(),
        access_log=False,
    )
    return 0


def relay(args: argparse.Namespace) -> int:
    async def body(runtime: Runtime) -> int:
        await _check_background_role(runtime)
        if args.once:
            report = await runtime.relay.drain()
            print(f"delivered={report.delivered} failed={report.failed}")
            return 0 if report.failed == 0 else 1
        await runtime.run_background(_stop_on_signals(), relay=True, ingest_worker=False)
        return 0

    return with_runtime(body, "relay")


def worker(args: argparse.Namespace) -> int:
    """Ingestion workers outside the API (scale-out); they share work through Postgres."""

    async def body(runtime: Runtime) -> int:
        await _check_background_role(runtime)
        if args.once:
            await asyncio.to_thread(runtime.embedder.load)
            processed = 0
            while await runtime.ingest_worker.run_once():
                processed += 1
            print(f"processed={processed}")
            return 0
        await runtime.run_background(_stop_on_signals(), relay=False, ingest_worker=True)
        return 0

    return with_runtime(body, "worker")


def embed_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from app.ml.embedding_server import create_embedding_app, standalone_settings

    settings = standalone_settings()
    if args.backend:
        settings = settings.model_copy(update={"embedding_backend": args.backend})
    uvicorn.run(
        create_embedding_app(settings),
        host=args.host,
        port=args.port,
        log_level=settings.api.log_level.lower(),
        access_log=False,
    )
    return 0


def mcp(args: argparse.Namespace) -> int:
    from app.mcp_server.identity import McpSettings
    from app.mcp_server.tools import build_server

    server = build_server(McpSettings())
    if args.transport == "stdio":
        server.run("stdio")
    else:
        server.settings.host, server.settings.port = args.host, args.port
        server.run("streamable-http")
    return 0


def llm_serve(args: argparse.Namespace) -> int:
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
    return serve_gguf(standalone_settings().model_copy(update=updates).llm)
