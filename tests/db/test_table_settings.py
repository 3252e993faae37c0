"""The tables' storage settings the migrations choose (docs/operations.md, "How the tables
age"): autovacuum sooner on the tables that churn (0026_retention), and room on ingest_tasks'
pages for the updates that can be HOT (0037_tenant_indexes, from `make
bench-task-fillfactor`)."""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

OPTIONS = text(
    "SELECT relname, coalesce(reloptions, '{}') FROM pg_class"
    " WHERE relnamespace = 'public'::regnamespace AND relkind = 'r'"
)
AUTOVACUUM = {"autovacuum_vacuum_scale_factor=0.05", "autovacuum_analyze_scale_factor=0.02"}


async def test_the_churning_tables_carry_their_settings(owner: AsyncEngine) -> None:
    async with owner.connect() as connection:
        options = {name: set(values) for name, values in await connection.execute(OPTIONS)}
    assert options["ingest_tasks"] == AUTOVACUUM | {"fillfactor=80"}
    # Every update of these two changes an indexed column: a fillfactor would only waste room.
    assert options["memories"] == AUTOVACUUM
    assert options["outbox"] == AUTOVACUUM
