"""An analyst's query over its whole tenant reads that tenant's rows by an index (issue 42,
0037_tenant_indexes): the row-level security policy's `tenant_id = (SELECT
cognis_analyst_tenant())` is an InitPlan, so it can be an index condition, and an index that
leads with tenant_id makes it one. Before 0037 no index led with tenant_id: such a query read
every tenant's rows (docs/benchmarks/analysts.md measures by how much)."""

from __future__ import annotations

import json
import uuid
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from tests.db.test_reader_escape import bound_analyst  # noqa: F401 - a fixture

PER_DAY = (
    "SELECT date_trunc('day', created_at) AS day, count(*) FROM {table}"
    " WHERE created_at > now() - interval '30 days' GROUP BY 1"
)


def _nodes(node: dict[str, Any]) -> list[dict[str, Any]]:
    return [node, *(n for child in node.get("Plans", []) for n in _nodes(child))]


async def test_a_whole_tenant_query_of_an_analyst_reads_its_tenant_by_an_index(
    owner: AsyncEngine,
    bound_analyst: tuple[str, str, uuid.UUID, str],  # noqa: F811
) -> None:
    _, url, _, _ = bound_analyst
    # The plan of a table shared by many tenants, which is the claim: with a few rows of a few
    # tenants, `tenant_id = <the analyst's tenant>` is rated as matching a large share of them,
    # both indexes cost about the same, and the planner may read (user_id, created_at) whole
    # (CI met it twice). The column's statistics say many tenants while the plan is read.
    await _many_tenants(owner, "SET (n_distinct = 1000)")
    engine = create_async_engine(url)
    try:
        async with engine.connect() as connection:
            # The plan a big table gets (these have a few rows: a scan would be cheaper).
            await connection.execute(text("SET enable_seqscan = off"))
            for table in ("memories", "ingest_decisions"):
                sql = PER_DAY.format(table=table)
                raw = (await connection.execute(text(f"EXPLAIN (FORMAT JSON) {sql}"))).scalar()
                plan = (json.loads(raw) if isinstance(raw, str) else raw)[0]["Plan"]
                scans = [n for n in _nodes(plan) if n.get("Relation Name") == table]
                assert len(scans) == 1, plan
                # An index scan of the table, or a bitmap heap scan over bitmap index scans
                # (the plan once the table holds other tenants' rows; it may scan the index
                # once for each of the policies' tenant conditions).
                by_index = [n for n in _nodes(scans[0]) if "Index Name" in n]
                assert {n["Index Name"] for n in by_index} == {
                    f"{table}_tenant_id_user_id_created_at_idx"
                }, scans
                assert any("tenant_id =" in n.get("Index Cond", "") for n in by_index), scans
                # Its rows are its tenant's: one a table here, tenant B's two are not counted.
                days = (await connection.execute(text(sql))).all()
                assert sum(count for _, count in days) == 1, (table, days)
    finally:
        await engine.dispose()
        await _many_tenants(owner, "RESET (n_distinct)")


async def _many_tenants(owner: AsyncEngine, option: str) -> None:
    async with owner.connect() as connection:
        for table in ("memories", "ingest_decisions"):
            await connection.execute(text(f"ALTER TABLE {table} ALTER COLUMN tenant_id {option}"))
            await connection.execute(text(f"ANALYZE {table}"))
        await connection.commit()
