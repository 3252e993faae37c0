"""No transaction is held open while a model works (issue 56): the background backfills
(sentence vectors, multilingual vectors, entities) and the ingestion worker read in one short
transaction, call the model with none open, and write in another.

Each model call of the code under test first asks Postgres, from a connection of its own,
which of that code's sessions (its connections carry an application name of their own) sit
"idle in transaction": a session that awaits a model inside a transaction shows there, for as
long as the model works, pinning the vacuum horizon and queueing any ALTER TABLE behind it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from app.config import LlmSettings
from app.db.engine import create_engine, create_sessionmaker
from app.db.tenant import DEFAULT_TENANT_ID, tenant_scope
from app.ingest.domain import IncomingMessage
from app.llm.client import ChatClient
from app.memories.entities import extract_missing_entities
from app.memories.multilingual_backfill import embed_missing_multilingual
from app.memories.sentence_backfill import embed_missing_sentences
from app.ml.multilingual import shared_encoder
from app.ml.ner import EntityRecognizer
from bench.scripted_llm import Reply
from tests.factories import create_memory
from tests.ingest.helpers import ingestion_on

# The application name of the code under test's connections: only its sessions are looked at
# (the relay and the in-process API share the database).
UNDER_TEST = "cognis-no-open-transaction"
QUEUE = "no-open-transaction"

IDLE_IN_TRANSACTION = text(
    "SELECT pid, state, left(query, 200) AS query FROM pg_stat_activity "
    "WHERE datname = current_database() AND application_name = :name "
    "AND state LIKE 'idle in transaction%'"
)

# What this connection sees of its own state: NULL where the role may not read states.
OWN_STATE = text("SELECT state FROM pg_stat_activity WHERE pid = pg_backend_pid()")


class Probe:
    """Asks Postgres at each model call which sessions of the code under test sit idle in a
    transaction; remembers the calls and what it found."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        self.calls: list[str] = []
        self.found: list[dict[str, Any]] = []

    async def check(self, model: str) -> None:
        async with self._engine.connect() as connection:
            rows = (await connection.execute(IDLE_IN_TRANSACTION, {"name": UNDER_TEST})).all()
            seen = (await connection.execute(OWN_STATE)).scalar_one()
        self.calls.append(model)
        self.found += [{"model": model, **row._asdict()} for row in rows]
        # The probe sees sessions' states at all (else it would pass whatever they do).
        assert seen is not None


def _workers_url(inprocess_api) -> str:  # type: ignore[no-untyped-def]
    store = inprocess_api.app.state.runtime.settings.store
    return (store.worker_database_url or store.database_url).get_secret_value()


@pytest.fixture
async def probe(inprocess_api) -> AsyncIterator[Probe]:
    """On the workers' role: Postgres shows the state of a session only to its own role (and
    to superusers), not to the owner."""
    store = inprocess_api.app.state.runtime.settings.store
    engine = create_engine(store, _workers_url(inprocess_api), application="cognis-probe")
    yield Probe(engine)
    await engine.dispose()


@pytest.fixture
async def sessions(inprocess_api) -> AsyncIterator[async_sessionmaker[AsyncSession]]:
    """Sessions on the workers' role, named so the probe finds them."""
    store = inprocess_api.app.state.runtime.settings.store
    engine = create_engine(store, _workers_url(inprocess_api), application=UNDER_TEST)
    yield create_sessionmaker(engine)
    await engine.dispose()


@pytest.fixture
def probed_embedder(inprocess_api, probe: Probe, monkeypatch: pytest.MonkeyPatch):
    """The runtime's real embedder, checked by the probe before each call (every caller of it:
    the pipeline, the category classifier, the backfill)."""
    embedder = inprocess_api.app.state.runtime.embedder
    embed = embedder.embed

    async def probed(texts, work=None):  # type: ignore[no-untyped-def]
        await probe.check("embedder")
        return await embed(texts, work)

    monkeypatch.setattr(embedder, "embed", probed)
    return embedder


async def test_the_sentence_backfill_embeds_with_no_transaction_open(
    backfill_alone, client, user_id, sessions, probe, probed_embedder
) -> None:
    for content in (
        "I just signed up for a pottery class yesterday. "
        "The kids loved the dinosaur exhibit at the museum.",
        "My sister finally moved back to Lisbon last spring. "
        "We are planning a long hiking trip in the Alps together.",
    ):
        await create_memory(client, user_id, content)
    probe.calls.clear()  # the writes' own calls
    report = await embed_missing_sentences(sessions, probed_embedder, user_id, batch_size=1)
    assert (report.memories, report.sentences, probe.calls) == (2, 4, ["embedder"] * 2)
    assert probe.found == []


async def test_the_multilingual_backfill_encodes_with_no_transaction_open(
    client, user_id, sessions, probe, monkeypatch: pytest.MonkeyPatch
) -> None:
    for content in ("毎朝コーヒーを飲みます。", "週末は山に登ります。"):
        await create_memory(client, user_id, content)
    async with sessions() as session, session.begin():  # as if written before migration 0034
        await session.execute(
            text("UPDATE memories SET embedding_ml = NULL WHERE user_id = :u"), {"u": user_id}
        )

    encoder = shared_encoder()
    encode = encoder.encode

    async def probed(texts):  # type: ignore[no-untyped-def]
        await probe.check("multilingual")
        return await encode(texts)

    monkeypatch.setattr(encoder, "encode", probed)
    done = await embed_missing_multilingual(sessions, encoder, user_id, batch_size=1)
    assert done == 2 and probe.calls == ["multilingual"] * 2
    assert probe.found == []


async def test_the_entity_backfill_recognises_with_no_transaction_open(
    backfill_alone, client, user_id, sessions, probe, monkeypatch: pytest.MonkeyPatch
) -> None:
    for content in ("Melanie moved to Osaka.", "I met Caroline in Paris."):
        await create_memory(client, user_id, content)
    recognizer = EntityRecognizer()
    extract = recognizer.extract

    def probed(texts, languages):  # type: ignore[no-untyped-def]
        # The recognizer runs in a thread: the probe runs on the loop, from there.
        import anyio.from_thread

        anyio.from_thread.run(probe.check, "ner")
        return extract(texts, languages)

    monkeypatch.setattr(recognizer, "extract", probed)
    report = await extract_missing_entities(sessions, recognizer, user_id, batch_size=1)
    assert (report.memories, probe.calls) == (2, ["ner"] * 2)
    assert probe.found == []


async def test_the_ingestion_worker_calls_models_with_no_transaction_open(
    client, user_id, inprocess_api, sessions, probe, probed_embedder
) -> None:
    runtime = inprocess_api.app.state.runtime
    service, worker = ingestion_on(runtime, sessions, probed_embedder, QUEUE)
    await create_memory(client, user_id, "I live in Tokyo.")
    sent = datetime.now(UTC)
    messages = [
        IncomingMessage("I moved to Osaka last month. I work as a nurse there.", sent),
        IncomingMessage("Actually, I'm not a nurse anymore.", sent.replace(microsecond=1)),
    ]
    with tenant_scope(DEFAULT_TENANT_ID):  # the API key's tenant
        job_id, _ = await service.submit(user_id, messages)
        while await worker.run_once():
            pass
        view = await service.read_job(user_id, job_id)
    assert view.state == "done", [t.last_error for t in view.tasks]
    assert probe.calls and probe.found == [], probe.found


async def test_the_ingestion_worker_awaits_the_llm_with_no_transaction_open(
    client, user_id, inprocess_api, sessions, probe, probed_embedder, llm, monkeypatch
) -> None:
    content = "I took up the cello last spring."
    llm.script(content, Reply.ops({"op": "ADD", "content": content, "category": "hobbies"}))
    chat = ChatClient(
        LlmSettings(llm_base_url=llm.base_url, llm_model=llm.model, llm_max_retries=0)
    )
    complete_json = chat.complete_json

    async def probed(*args, **kwargs):  # type: ignore[no-untyped-def]
        await probe.check("llm")
        return await complete_json(*args, **kwargs)

    monkeypatch.setattr(chat, "complete_json", probed)
    runtime = inprocess_api.app.state.runtime
    service, worker = ingestion_on(
        runtime, sessions, probed_embedder, QUEUE, chat, ingest_llm_gate_threshold=0.0
    )
    await create_memory(client, user_id, "I play the piano.")
    with tenant_scope(DEFAULT_TENANT_ID):
        job_id, _ = await service.submit(user_id, [IncomingMessage(content, datetime.now(UTC))])
        while await worker.run_once():
            pass
        view = await service.read_job(user_id, job_id)
    await chat.close()
    assert view.state == "done", [t.last_error for t in view.tasks]
    assert "llm" in probe.calls
    assert probe.found == [], probe.found
