"""Bulk import throughput: memories/s with precomputed vectors, with and without
--defer-index, then a rerun that skips everything, then the round trip: the first user
exported with its vectors (`python -m app export --vectors`'s code) and that export imported
as another user.

Writes N synthetic JSON Lines (random unit vectors, categories given, so no model runs) to a
temporary file and imports them through the same code as `python -m app import`, each run
as a new user of the default tenant. `--defer-index` drops the memories table's HNSW indexes
for the load and rebuilds them after it over the *whole* table, as the tables' owner
(COGNIS_MIGRATION_DATABASE_URL): benchmark databases only (every search scans exactly
meanwhile), and its rebuild time grows with everything already stored. Erases its users at
the end. Prints numbers; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
import uuid
from pathlib import Path

import msgspec
import numpy as np
from sqlalchemy import text

from app.config import get_settings
from app.db.tenant import DEFAULT_TENANT_ID, act_as
from app.db.vector_indexes import build_hnsw_indexes, drop_hnsw_indexes
from app.imports.export import ExportOptions, export_lines
from app.imports.service import ImportOptions, ImportSummary
from app.imports.sources import file_lines
from app.memories.erasure import UserEraser
from app.runtime import Runtime
from app.vocabulary import SEED_CATEGORIES
from bench.database import owner_engine


def write_lines(path: Path, count: int, seed: int = 11) -> None:
    """Lines with unit vectors rounded to 6 decimals (about 7 KB a line)."""
    rng = np.random.default_rng(seed)
    encoder = msgspec.json.Encoder()
    with path.open("wb") as file:
        for first in range(0, count, 1000):
            vectors = rng.normal(size=(min(1000, count - first), 768)).astype(np.float32)
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            for offset, vector in enumerate(np.round(vectors.astype(np.float64), 6).tolist()):
                number = first + offset
                line = {
                    "external_id": f"bench-{number}",
                    "content": f"Synthetic imported memory {number}: a fact about topic "
                    f"{number % 97} from an earlier assistant",
                    "category": SEED_CATEGORIES[number % len(SEED_CATEGORIES)],
                    "event_time": "2024-05-01T12:00:00Z",
                    "embedding": vector,
                }
                file.write(encoder.encode(line) + b"\n")


async def timed_import(
    runtime: Runtime, path: Path, user_id: str, batch_size: int
) -> tuple[ImportSummary, float]:
    started = time.perf_counter()
    summary = await runtime.importer.run(
        file_lines(path), ImportOptions(user_id=user_id, line_users="ignore", batch_size=batch_size)
    )
    return summary, time.perf_counter() - started


async def timed_export(runtime: Runtime, user_id: str, path: Path) -> float:
    started = time.perf_counter()
    options = ExportOptions(versions="current", vectors=True)
    with path.open("wb") as out:
        async for line in export_lines(runtime.sessionmaker, DEFAULT_TENANT_ID, user_id, options):
            out.write(line)
    return time.perf_counter() - started


def show(label: str, summary: ImportSummary, seconds: float) -> None:
    print(
        f"  {label:38s} {seconds:7.2f} s  imported {summary.imported:6d}  skipped "
        f"{summary.skipped:6d}  failed {summary.failed}  -> "
        f"{summary.lines / seconds:8,.0f} lines/s, {summary.imported / seconds:8,.0f} memories/s"
    )


async def main_async(args: argparse.Namespace) -> int:
    runtime = Runtime.build(get_settings())
    act_as(DEFAULT_TENANT_ID)  # as `python -m app import` without --tenant
    owner = owner_engine(runtime.settings)  # index DDL needs the tables' owner
    run = uuid.uuid4().hex[:6]
    users = [f"import-{run}-indexed", f"import-{run}-deferred", f"import-{run}-round-trip"]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "history.jsonl"
        started = time.perf_counter()
        write_lines(path, args.lines)
        print(
            f"wrote {args.lines} lines ({path.stat().st_size / 1e6:.0f} MB) in "
            f"{time.perf_counter() - started:.1f} s"
        )
        async with owner.connect() as connection:  # every tenant's: the rebuild indexes all
            stored: int = (
                await connection.execute(text("SELECT count(*) FROM memories"))
            ).scalar_one()
        print(f"== import of {args.lines} lines, batch size {args.batch_size}; {stored} stored")
        try:
            summary, seconds = await timed_import(runtime, path, users[0], args.batch_size)
            show("HNSW indexes maintained", summary, seconds)

            started = time.perf_counter()
            await drop_hnsw_indexes(owner)
            try:
                summary, seconds = await timed_import(runtime, path, users[1], args.batch_size)
            finally:
                load_done = time.perf_counter()
                await build_hnsw_indexes(owner)
            total = time.perf_counter() - started
            show("--defer-index: the load", summary, seconds)
            show("--defer-index: load + drop + rebuild", summary, total)
            print(f"  (rebuilding the HNSW index took {time.perf_counter() - load_done:.1f} s)")

            summary, seconds = await timed_import(runtime, path, users[0], args.batch_size)
            show("rerun (everything skipped)", summary, seconds)

            exported = Path(folder) / "export.jsonl"
            export_s = await timed_export(runtime, users[0], exported)
            lines = sum(1 for _ in exported.open("rb"))
            print(
                f"  {'export with vectors':38s} {export_s:7.2f} s  {lines:6d} lines"
                f"{'':37s}-> {lines / export_s:8,.0f} memories/s"
            )
            summary, seconds = await timed_import(runtime, exported, users[2], args.batch_size)
            show("import of that export", summary, seconds)
            print(
                f"  round trip (export + import): {summary.imported / (export_s + seconds):,.0f}"
                " memories/s"
            )
        finally:
            eraser = UserEraser(runtime.sessionmaker, runtime.relay, runtime.settings.relay)
            for user in users:
                await eraser.erase(user)
            await runtime.close()
            await owner.dispose()
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lines", type=int, default=20_000)
    parser.add_argument("--batch-size", type=int, default=500)
    return asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
