"""How long `python -m app detect-languages` takes (issue 54): the backfill that migration 0028
leaves to it on a database of more than 10,000 memory versions.

A scratch database (the owner's, COGNIS_MIGRATION_DATABASE_URL; dropped at the end) is migrated
to head and given --versions memory versions of the default tenant with `language` NULL, their
contents the short chat turns of bench/data/language_turns.tsv (16 languages, some without
letters) in turn. Then the command's function runs as the background role, and its rate is
extrapolated to a million versions (linear: batches by id, each a constant cost).

Prints one Markdown line; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid
from pathlib import Path

from sqlalchemy import text
from sqlalchemy.engine import make_url

from app.config import Settings
from app.db.engine import create_engine, create_sessionmaker
from app.db.tenant import DEFAULT_TENANT_ID
from app.memories.language_backfill import LanguageReport, detect_missing_languages
from app.ml.language import warm_up
from bench.database import owner_url, scratch_database, urls_on
from bench.migrations import alembic

TURNS = Path(__file__).resolve().parent / "data" / "language_turns.tsv"
ZERO = "array_fill(0::real, ARRAY[{}])::vector"


def turns() -> list[str]:
    lines = TURNS.read_text().splitlines()
    return [line.split("\t", 1)[1] for line in lines if line and not line.startswith("#")]


async def bench(args: argparse.Namespace) -> tuple[LanguageReport, float]:
    settings = Settings()
    base = owner_url(settings)
    name = f"cognis_bench_languages_{uuid.uuid4().hex[:8]}"
    url = make_url(base).set(database=name).render_as_string(hide_password=False)
    await scratch_database(base, name, create=True)
    owner = create_engine(settings.store, url)
    background = create_engine(settings.store, urls_on(settings, name)["worker_database_url"])
    try:
        if (done := await alembic(url, "head")).returncode != 0:
            raise SystemExit(done.stderr[-3000:])
        texts = turns()
        for start in range(0, args.versions, 10_000):
            stop = min(start + 10_000, args.versions)
            async with owner.begin() as connection:
                await connection.execute(
                    text("SELECT set_config('cognis.tenant_id', :t, true)"),
                    {"t": str(DEFAULT_TENANT_ID)},
                )
                await connection.execute(
                    text(
                        "INSERT INTO memories (id, user_id, chain_id, version, content, category,"
                        " embedding_768d, embedding_256d) SELECT gen_random_uuid(),"
                        " 'user-' || (g % 1000), gen_random_uuid(), 1,"
                        " (CAST(:texts AS text[]))[1 + g % :n], 'travel',"
                        f" {ZERO.format(768)}, {ZERO.format(256)}"
                        " FROM generate_series(:start, :stop - 1) g"
                    ),
                    {"texts": texts, "n": len(texts), "start": start, "stop": stop},
                )
        async with owner.connect() as connection:
            await connection.execution_options(isolation_level="AUTOCOMMIT")
            await connection.execute(text("VACUUM ANALYZE memories"))
        warm_up()  # the command's process loads the models once, as it starts
        started = time.perf_counter()
        report = await detect_missing_languages(
            create_sessionmaker(background), batch_size=args.batch_size
        )
        return report, time.perf_counter() - started
    finally:
        await owner.dispose()
        await background.dispose()
        await scratch_database(base, name, create=False)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--versions", type=int, default=50_000)
    parser.add_argument("--batch-size", type=int, default=1000)
    args = parser.parse_args()
    report, took = asyncio.run(bench(args))
    per = took / max(report.read, 1)
    print(
        f"| {report.read:,} | {report.labelled:,} | {took:.1f} | {per * 1000:.2f} "
        f"| {per * 1_000_000 / 60:.0f} |"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
