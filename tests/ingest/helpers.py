"""Plain helpers for ingestion tests."""

from __future__ import annotations

import asyncio
import re
import time
from typing import Any

import httpx
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from app.ingest.pipeline import IngestPipeline
from app.ingest.service import IngestService
from app.ingest.worker import IngestWorker
from app.llm.client import ChatClient
from app.ml.embedder import Embedder


def message(content: str, timestamp: str | None = None, **fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"content": content, **fields}
    if timestamp is not None:
        body["timestamp"] = timestamp
    return body


async def ingest(
    client: httpx.AsyncClient, user_id: str, *messages: dict[str, Any], wait: bool = True
) -> dict:
    """Submit messages; with wait, return the finished job."""
    response = await client.post(
        f"/v1/users/{user_id}/messages",
        params={"wait": str(wait).lower()},
        json={"messages": list(messages)},
    )
    assert response.status_code in (200, 202), response.text
    job = response.json()
    if wait:
        assert response.status_code == 200, job
        assert job["state"] == "done", job
    return job


async def wait_job(client: httpx.AsyncClient, user_id: str, job_id: str, timeout: float = 60):  # noqa: ASYNC109
    deadline = time.monotonic() + timeout
    while True:
        response = await client.get(f"/v1/users/{user_id}/jobs/{job_id}")
        assert response.status_code == 200, response.text
        job = response.json()
        if job["state"] in ("done", "failed"):
            return job
        assert time.monotonic() < deadline, f"job still {job['state']}: {job}"
        await asyncio.sleep(0.1)


def decisions(job: dict) -> list[dict]:
    return [d for m in job["messages"] for d in m["decisions"]]


async def current_memories(client: httpx.AsyncClient, user_id: str) -> list[dict]:
    response = await client.get(f"/v1/users/{user_id}/memories")
    assert response.status_code == 200, response.text
    return response.json()["items"]


async def scalar(db: AsyncEngine, sql: str, **params: Any) -> Any:
    async with db.connect() as connection:
        return (await connection.execute(text(sql), params)).scalar_one()


async def rows(db: AsyncEngine, sql: str, **params: Any) -> list[Any]:
    async with db.connect() as connection:
        return list((await connection.execute(text(sql), params)).mappings())


_SAMPLE = re.compile(r'^cognis_embedding_(texts|batches)_total\{embedder="memories"\} (\S+)$', re.M)


async def model_counts(client: httpx.AsyncClient) -> dict[str, float]:
    """Texts embedded and model calls made so far by the API's memory embedder."""
    response = await client.get("/metrics")
    assert response.status_code == 200
    counts = {"texts": 0.0, "batches": 0.0}
    counts.update({kind: float(value) for kind, value in _SAMPLE.findall(response.text)})
    return counts


def ingestion_on(
    runtime: Any,
    sessionmaker: async_sessionmaker[AsyncSession],
    embedder: Embedder,
    queue: str,
    llm: ChatClient | None = None,
    **ingest: Any,
) -> tuple[IngestService, IngestWorker]:
    """An ingestion service and its worker built from `runtime`'s parts, on a queue of the
    test's own (no other worker takes its tasks), with these sessions and this embedder."""
    settings = runtime.settings
    ingest_settings = settings.ingest.model_copy(
        update={"ingest_queue": queue, "ingest_settle_ms": 0, **ingest}
    )
    pipeline = IngestPipeline(
        sessionmaker,
        embedder,
        runtime.classifier,
        llm,
        api=settings.api,
        embedding=settings.embedding,
        ingest=ingest_settings,
        retrieval=settings.retrieval,
    )
    worker = IngestWorker(sessionmaker, pipeline, ingest_settings)
    return IngestService(sessionmaker, pipeline, worker, settings.api, ingest_settings), worker
