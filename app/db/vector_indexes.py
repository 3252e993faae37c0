"""Drop and rebuild the HNSW indexes of memories around a bulk load.

Maintaining the HNSW graph row by row is most of what an insert costs; building it once
over the loaded table is far cheaper for a large load. While it is gone every vector
search falls back to an exact scan, so this is for a quiet deployment (or a benchmark) only.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import cast

from sqlalchemy import Connection, Index, Table, text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.models import Memory

HNSW_INDEXES: list[Index] = [
    index
    for index in cast(Table, Memory.__table__).indexes
    if index.dialect_options["postgresql"]["using"] == "hnsw"
]


async def drop_hnsw_indexes(engine: AsyncEngine) -> None:
    async with engine.begin() as connection:
        for index in HNSW_INDEXES:
            await connection.execute(text(f"DROP INDEX IF EXISTS {index.name}"))


async def build_hnsw_indexes(
    engine: AsyncEngine,
    on_built: Callable[[str, float], None] | None = None,
    maintenance_work_mem: str = "2GB",
) -> None:
    """(Re)create the HNSW indexes exactly as the models define them; a no-op for those that
    exist. One transaction each, so an interrupted rebuild keeps the indexes it finished.
    `on_built(name, seconds)` hears of each one built."""
    for index in HNSW_INDEXES:
        async with engine.begin() as connection:
            # A graph that fits in maintenance_work_mem builds several times faster.
            await connection.execute(
                text("SELECT set_config('maintenance_work_mem', :mem, true)"),
                {"mem": maintenance_work_mem},
            )
            started = time.perf_counter()
            await connection.run_sync(_create, index)
        if on_built is not None:
            on_built(str(index.name), time.perf_counter() - started)


def _create(connection: Connection, index: Index) -> None:
    index.create(connection, checkfirst=True)
