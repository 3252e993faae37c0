"""Command line: serve, relay, worker, reindex, embed-sentences, extract-entities,
embed-multilingual, requeue-messages, retention, import, export, backup, restore, admin,
webhooks, migrate, embed-serve, mcp, heartbeat-check."""

# Every command and its flags are declared here; what each does lives beside: processes.py (the
# long-running ones), maintenance.py (the stores), admin.py (tenants and their keys),
# webhooks.py (a tenant's webhook subscriptions).

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from app.cli import maintenance, processes
from app.cli.admin import add_admin_commands
from app.cli.webhooks import add_webhook_commands
from app.config import get_settings
from app.logging import configure_logging


def _positive(value: str) -> int:
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return number


def _heartbeat_check(args: argparse.Namespace) -> int:
    from app.heartbeat import check

    relay = get_settings().relay
    return check(relay.heartbeat_dir, relay.heartbeat_max_age_s)


def mcp_main() -> int:
    """`cognis-mcp [--transport ...]`: `cognis mcp`, as a console script of its own."""
    return main(["mcp", *sys.argv[1:]])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="cognis", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the REST API (with the outbox relay inside)")
    serve.add_argument("--host")
    serve.add_argument("--port", type=int)
    serve.set_defaults(func=processes.serve)
    relay = commands.add_parser("relay", help="run the outbox relay on its own (scale-out)")
    relay.add_argument("--once", action="store_true", help="deliver what is due, then exit")
    relay.set_defaults(func=processes.relay)
    reindex = commands.add_parser("reindex", help="rebuild the OpenSearch index from Postgres")
    reindex.add_argument("--tenant", help="only this tenant's memories (id or name)")
    reindex.add_argument("--user", help="only this user's memories (with --tenant)")
    reindex.add_argument("--recreate", action="store_true", help="drop and recreate the index")
    reindex.set_defaults(func=maintenance.reindex)
    sentences = commands.add_parser(
        "embed-sentences",
        help="embed the sentences of current memories written without them (rerunnable)",
    )
    sentences.add_argument("--tenant", help="only this tenant's memories (id or name)")
    sentences.add_argument("--user", help="only this user's memories (with --tenant)")
    sentences.add_argument("--batch-size", type=_positive, default=200, help="memories a batch")
    sentences.set_defaults(func=maintenance.embed_sentences)
    entities = commands.add_parser(
        "extract-entities",
        help="find the named things of current memories not yet read for them (rerunnable)",
    )
    entities.add_argument("--tenant", help="only this tenant's memories (id or name)")
    entities.add_argument("--user", help="only this user's memories (with --tenant)")
    entities.add_argument("--batch-size", type=_positive, default=200, help="memories a batch")
    entities.set_defaults(func=maintenance.extract_entities)
    multilingual = commands.add_parser(
        "embed-multilingual",
        help="give current memories written without it their multilingual vector (rerunnable)",
    )
    multilingual.add_argument("--tenant", help="only this tenant's memories (id or name)")
    multilingual.add_argument("--user", help="only this user's memories (with --tenant)")
    multilingual.add_argument("--batch-size", type=_positive, default=500, help="memories a batch")
    multilingual.set_defaults(func=maintenance.embed_multilingual)
    languages = commands.add_parser(
        "detect-languages",
        help="label memory versions stored without a language (after migration 0028; rerunnable)",
    )
    languages.add_argument("--tenant", help="only this tenant's memories (id or name)")
    languages.add_argument("--user", help="only this user's memories (with --tenant)")
    languages.add_argument("--batch-size", type=_positive, default=1000, help="versions a batch")
    languages.set_defaults(func=maintenance.detect_languages)
    requeue = commands.add_parser(
        "requeue-messages",
        help="queue failed ingestion tasks again (their messages are stored; docs/operations.md)",
    )
    requeue.add_argument("--tenant", help="only this tenant's tasks (id or name)")
    requeue.add_argument("--user", help="only this user's tasks")
    requeue.add_argument("--queue", help="only this queue's tasks (default: every queue)")
    requeue.set_defaults(func=maintenance.requeue_messages)
    retention = commands.add_parser(
        "retention",
        help="delete rows whose use is over, once (delivered outbox events, expired "
        "idempotency keys, finished jobs; COGNIS_*_RETENTION_*)",
    )
    retention.add_argument(
        "--dry-run", action="store_true", help="count the rows due per table, delete nothing"
    )
    retention.set_defaults(func=maintenance.retention)
    worker = commands.add_parser("worker", help="run ingestion workers on their own (scale-out)")
    worker.add_argument("--once", action="store_true", help="process what is due, then exit")
    worker.set_defaults(func=processes.worker)
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
    bulk.set_defaults(func=maintenance.import_history)
    export = commands.add_parser(
        "export",
        help="export a user's memories as JSON Lines, in the import's line format",
    )
    export.add_argument("--user", required=True, help="whose memories")
    export.add_argument("--tenant", help="the tenant (id or name; default: default)")
    export.add_argument(
        "--versions", choices=["current", "all"], default="current", help="default: current"
    )
    export.add_argument("--vectors", action="store_true", help="add each line's embedding")
    export.add_argument("--agent", help="the agent's memories and the shared ones")
    export.add_argument("--run", help="the run's memories and those of no run")
    export.add_argument("--filters", help="a filter as JSON (docs/api.md, Filters)")
    export.add_argument("--output", "-o", help="the file to write (default: stdout)")
    export.set_defaults(func=maintenance.export_history)
    backup = commands.add_parser(
        "backup", help="dump the database whole (row counts checked); docs/operations.md"
    )
    backup.add_argument("file", type=Path, help="the dump to write (pg_dump custom format)")
    backup.add_argument("--database-url", help="default: COGNIS_BACKUP_DATABASE_URL")
    backup.set_defaults(func=maintenance.backup)
    restore = commands.add_parser(
        "restore", help="restore a dump into a new database, checked against its row counts"
    )
    restore.add_argument("file", type=Path, help="a dump written by `backup`")
    restore.add_argument("--into", required=True, help="the new database's name")
    restore.set_defaults(func=maintenance.restore)
    add_admin_commands(commands)
    add_webhook_commands(commands)
    migrate = commands.add_parser("migrate", help="alembic upgrade")
    migrate.add_argument("revision", nargs="?", default="head")
    migrate.set_defaults(func=maintenance.migrate)
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
    embed_serve.set_defaults(func=processes.embed_serve)
    mcp = commands.add_parser(
        "mcp", help="MCP server (stdio, or HTTP beside the API) calling the API (COGNIS_MCP_*)"
    )
    mcp.add_argument("--transport", choices=("stdio", "http"), default="stdio")
    mcp.add_argument("--host", default="127.0.0.1")
    mcp.add_argument("--port", type=int, default=8001)
    mcp.set_defaults(func=processes.mcp)
    llm_serve = commands.add_parser(
        "llm-serve", help="serve a local GGUF model over an OpenAI-compatible API (xllamacpp)"
    )
    llm_serve.add_argument("--gguf", help="the GGUF file (default: COGNIS_LLM_GGUF_PATH)")
    llm_serve.add_argument("--port", type=int, help="default: COGNIS_LLM_LOCAL_PORT")
    llm_serve.add_argument("--threads", type=_positive, help="default: COGNIS_LLM_LOCAL_THREADS")
    llm_serve.set_defaults(func=processes.llm_serve)
    heartbeat = commands.add_parser(
        "heartbeat-check",
        help="exit 1 when a relay or ingestion loop of this pod has not gone round within "
        "COGNIS_HEARTBEAT_MAX_AGE_S (COGNIS_HEARTBEAT_DIR; a liveness probe)",
    )
    heartbeat.set_defaults(func=_heartbeat_check)
    args = parser.parse_args(argv)
    if args.command == "mcp":  # a thin API client: no database, no models
        configure_logging()
        return int(args.func(args))
    if args.command in ("embed-serve", "llm-serve"):
        from app.ml.embedding_server import standalone_settings

        settings = standalone_settings()  # needs no database URL
    else:
        settings = get_settings()
    configure_logging(settings.api.log_level, settings.api.log_json)
    return int(args.func(args))
