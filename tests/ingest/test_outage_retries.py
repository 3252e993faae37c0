"""A message accepted is a message applied (issue 56): a task that fails because the model
service is away spends no attempt and waits for it, past COGNIS_INGEST_MAX_ATTEMPTS, and is
applied once the model is back; past COGNIS_INGEST_OUTAGE_MAX_AGE_S it is failed, and
`python -m app requeue-messages` queues it again."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest
from sqlalchemy import text
from sqlalchemy.exc import InterfaceError as DBAPIInterfaceError

from app.db.tenant import DEFAULT_TENANT_ID, tenant_scope
from app.errors import EmbedderUnavailableError, InvalidInputError
from app.ingest.domain import IncomingMessage
from app.ingest.service import IngestService
from app.ingest.worker import is_outage
from app.ml.embedder import Embedder, build_embedder
from tests.conftest import run_cli_async, wait_until
from tests.ingest.helpers import ingestion_on

QUEUE = "outage-retries"


@pytest.fixture
async def dead_embedder(inprocess_api, dead_embedder_url: str) -> AsyncIterator[Embedder]:
    """The real HTTP embedder, pointed at a port where nothing listens."""
    embedding = inprocess_api.app.state.runtime.settings.embedding.model_copy(
        update={
            "embedding_http_url": dead_embedder_url,
            "embedding_http_max_retries": 1,
            "embedding_http_backoff_base_s": 0.01,
            "multilingual_embedder": False,
        }
    )
    embedder = build_embedder(embedding, "http", None)
    embedder.load()
    yield embedder


def ingestion(inprocess_api, embedder: Embedder, **ingest: object) -> IngestService:
    """An ingestion service (its worker: `._worker`) on a queue of this module."""
    runtime = inprocess_api.app.state.runtime
    service, _ = ingestion_on(runtime, runtime.background_sessionmaker, embedder, QUEUE, **ingest)
    return service


async def task_row(db, user_id: str) -> dict:
    async with db.connect() as connection:
        row = (
            await connection.execute(
                text(
                    "SELECT state, attempts, last_error, available_at <= now() AS due "
                    "FROM ingest_tasks WHERE user_id = :u"
                ),
                {"u": user_id},
            )
        ).one()
    return row._asdict()


async def submit(service: IngestService, user_id: str, content: str):  # type: ignore[no-untyped-def]
    """A message of the default tenant's user (as the API key's requests are)."""
    with tenant_scope(DEFAULT_TENANT_ID):
        job_id, _ = await service.submit(user_id, [IncomingMessage(content, datetime.now(UTC))])
    return job_id


async def test_a_model_outage_spends_no_attempt_and_the_message_is_applied_once_it_is_back(
    inprocess_api, db, user_id, dead_embedder
) -> None:
    down = ingestion(inprocess_api, dead_embedder, ingest_max_attempts=2)
    job_id = await submit(down, user_id, "I moved to Lisbon last spring.")
    rounds = 0
    for _ in range(4):  # twice the attempts a failure may spend
        await wait_until(lambda: _due(db, user_id), timeout=60, interval=0.2)
        assert await down._worker.run_once()
        rounds += 1
        task = await task_row(db, user_id)
        assert task["state"] == "queued", task
        assert "EmbedderUnavailableError" in task["last_error"]
        assert task["attempts"] == 0  # the outage's attempts given back
    assert rounds > 2

    back = ingestion(inprocess_api, inprocess_api.app.state.runtime.embedder)
    await wait_until(lambda: _due(db, user_id), timeout=60, interval=0.2)
    assert await back._worker.run_once()
    view = await read_job(back, user_id, job_id)
    assert view.state == "done", [t.last_error for t in view.tasks]
    assert any(d.operation == "ADD" for ds in view.decisions.values() for d in ds)


async def test_past_the_outage_age_a_task_fails_and_the_command_queues_it_again(
    inprocess_api, db, migrated, user_id, dead_embedder
) -> None:
    down = ingestion(inprocess_api, dead_embedder, ingest_outage_max_age_s=0)
    job_id = await submit(down, user_id, "I started learning the cello.")
    assert await down._worker.run_once()
    task = await task_row(db, user_id)
    assert task["state"] == "failed" and "EmbedderUnavailableError" in task["last_error"]

    result = await run_cli_async(
        migrated, "app", "requeue-messages", "--user", user_id, "--queue", QUEUE
    )
    assert result.returncode == 0, result.stderr
    assert "requeued 1 failed messages" in result.stdout
    task = await task_row(db, user_id)
    assert (task["state"], task["attempts"], task["due"]) == ("queued", 0, True)

    back = ingestion(inprocess_api, inprocess_api.app.state.runtime.embedder)
    assert await back._worker.run_once()
    assert (await read_job(back, user_id, job_id)).state == "done"


async def _due(db, user_id: str) -> bool:  # type: ignore[no-untyped-def]
    return bool((await task_row(db, user_id))["due"])


async def read_job(service: IngestService, user_id: str, job_id):  # type: ignore[no-untyped-def]
    with tenant_scope(DEFAULT_TENANT_ID):
        return await service.read_job(user_id, job_id)


def test_an_outage_is_the_model_services_or_a_stores_never_the_messages() -> None:
    def raised_from(cause: Exception) -> Exception:
        try:
            raise RuntimeError("while embedding the claim") from cause
        except RuntimeError as exc:
            return exc

    assert is_outage(EmbedderUnavailableError("embedding server unavailable: HTTP 503"))
    assert is_outage(raised_from(EmbedderUnavailableError("connection refused")))
    assert is_outage(DBAPIInterfaceError("SELECT 1", {}, Exception("connection is closed")))
    assert not is_outage(InvalidInputError("year 1 is out of range"))
    assert not is_outage(OverflowError("date value out of range"))
    assert not is_outage(raised_from(ValueError("a bug")))
