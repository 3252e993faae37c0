"""A claim of several users: one claim, one model call for all their texts, then each user's
messages applied in order in a transaction of its own. A text the model fails on fails only
its own user's batch; a worker that dies between two users' transactions loses nothing.

The worker here is built on the in-process API's runtime, on a queue of its own (no running
worker takes these tasks), and driven claim by claim with `run_once`."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.tenant import DEFAULT_TENANT_ID, tenant_scope
from app.errors import EmbedderAnswerError
from app.ingest.domain import IncomingMessage
from app.ingest.intake import save_messages
from app.ingest.pipeline import IngestPipeline
from app.ingest.repository import IngestRepository
from app.ingest.worker import IngestWorker
from app.memories.drafts import interactive_write
from app.ml.embedder import Embedding
from tests.conftest import API_KEY, InProcessApi, wait_until
from tests.ingest.helpers import rows, scalar

SPOILED = "a text the model cannot take"


class CountingPipeline:
    """The runtime's pipeline, with its model calls counted (`calls`: the texts of each, made
    by the worker or inside a decision) and one text the model fails on. With `hold`, the
    decisions of every user after the first to be applied wait for ever (`holding` set once
    one waits), as in a worker about to die."""

    def __init__(self, inner: IngestPipeline, monkeypatch: pytest.MonkeyPatch) -> None:
        self._inner = inner
        self.calls: list[list[str]] = []
        self.applied_users: list[str] = []
        self.hold = False
        self.holding = asyncio.Event()
        # Set to an event: the claim's model call (before its transaction) or every decision
        # (inside it, the user's locks held) waits for it.
        self.embed_gate: asyncio.Event | None = None
        self.decide_gate: asyncio.Event | None = None
        embed = inner.embed

        async def counted(texts: list[str], user_id: str) -> list[Embedding]:
            await self._pass(self.embed_gate)
            self.calls.append(list(texts))
            if any(SPOILED in t for t in texts):
                raise EmbedderAnswerError("the model answered no vector for one text")
            return await embed(texts, user_id)

        monkeypatch.setattr(inner, "embed", counted)

    async def embed(self, texts: list[str], user_id: str) -> list[Embedding]:
        return await self._inner.embed(texts, user_id)

    def texts_to_prefetch(self, content: str, role: str) -> list[str]:
        return self._inner.texts_to_prefetch(content, role)

    async def _pass(self, gate: asyncio.Event | None) -> None:
        if gate is not None:
            self.holding.set()
            await gate.wait()

    @property
    def asks_llm(self) -> bool:
        return self._inner.asks_llm

    async def decide(self, session: Any, context: Any, answer: Any = None) -> Any:
        await self._pass(self.decide_gate)
        if self.hold and self.applied_users and context.user_id != self.applied_users[0]:
            self.holding.set()
            await asyncio.Event().wait()
        return await self._inner.decide(session, context, answer)

    async def apply(self, session: Any, job_id: uuid.UUID, decided: Any) -> Any:
        rows_ = await self._inner.apply(session, job_id, decided)
        if decided.context.user_id not in self.applied_users:
            self.applied_users.append(decided.context.user_id)
        return rows_


def _worker(
    api: InProcessApi, queue: str, monkeypatch: pytest.MonkeyPatch, lease_s: float = 15.0
) -> tuple[IngestWorker, CountingPipeline]:
    runtime = api.app.state.runtime
    ingest = runtime.settings.ingest.model_copy(
        update={
            "ingest_queue": queue,
            "ingest_settle_ms": 0,
            "ingest_lease_s": lease_s,
            "ingest_heartbeat_s": lease_s / 4,
        }
    )
    pipeline = CountingPipeline(runtime.ingest_pipeline, monkeypatch)
    worker = IngestWorker(runtime.background_sessionmaker, cast(Any, pipeline), ingest)
    return worker, pipeline


async def _queue(api: InProcessApi, worker: IngestWorker, user_id: str, texts: list[str]) -> None:
    """The user's messages saved and queued on the worker's queue, a second apart."""
    runtime = api.app.state.runtime
    start = datetime.now(UTC) - timedelta(minutes=5)
    messages = [
        IncomingMessage(content=t, sent_at=start + timedelta(seconds=i))
        for i, t in enumerate(texts)
    ]
    with tenant_scope(DEFAULT_TENANT_ID):
        async with runtime.sessionmaker() as session, session.begin():
            await save_messages(
                IngestRepository(session),
                runtime.settings.api,
                worker._ingest,
                user_id,
                messages,
                interactive_write(user_id),
            )


async def _tasks(db: AsyncEngine, user_id: str) -> list[Any]:
    return await rows(
        db,
        "SELECT t.state, t.attempts, t.last_error, m.content FROM ingest_tasks t"
        " JOIN messages m ON m.id = t.message_id WHERE t.user_id = :u ORDER BY t.sent_at",
        u=user_id,
    )


async def _memories(db: AsyncEngine, user_id: str) -> list[Any]:
    """The user's current memories, each with how many outbox rows index it."""
    return await rows(
        db,
        "SELECT m.content,"
        " (SELECT count(*) FROM outbox o WHERE o.memory_id = m.id AND o.op = 'index') AS outbox"
        " FROM memories m WHERE m.user_id = :u AND m.is_current",
        u=user_id,
    )


def _users(n: int) -> list[str]:
    return [f"g-{uuid.uuid4().hex[:10]}" for _ in range(n)]


async def test_several_users_are_claimed_embedded_in_one_call_and_applied_in_order(
    inprocess_api: InProcessApi, db: AsyncEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    worker, pipeline = _worker(inprocess_api, f"group-{uuid.uuid4().hex[:8]}", monkeypatch)
    users = _users(3)
    texts = {
        u: [f"I keep bees in hive {u}", f"I keep bees in hive {u}", f"My sister lives in {u}"]
        for u in users
    }
    for user in users:
        await _queue(inprocess_api, worker, user, texts[user])

    assert await worker.run_once()

    # One model call, for the nine texts of the three users.
    assert len(pipeline.calls) == 1
    assert sorted(pipeline.calls[0]) == sorted(t for u in users for t in texts[u])
    assert not await worker.run_once()  # nothing was left for a second claim
    for user in users:
        assert [t.state for t in await _tasks(db, user)] == ["done"] * 3
        decisions = await rows(
            db,
            "SELECT d.operation FROM ingest_decisions d JOIN messages m ON m.id = d.message_id"
            " WHERE d.user_id = :u ORDER BY m.sent_at, d.position",
            u=user,
        )
        # The second message met the first's memory, written earlier in the same claim.
        assert [d.operation for d in decisions] == ["ADD", "NONE", "ADD"]
        memories = await _memories(db, user)
        assert sorted(m.content for m in memories) == sorted([texts[user][0], texts[user][2]])
        assert all(m.outbox == 1 for m in memories)


async def test_a_text_the_model_fails_on_fails_only_its_users_batch(
    inprocess_api: InProcessApi, db: AsyncEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    worker, pipeline = _worker(inprocess_api, f"group-{uuid.uuid4().hex[:8]}", monkeypatch)
    spoiled, fine = _users(2)
    await _queue(inprocess_api, worker, spoiled, [f"{SPOILED} {spoiled}", "I play chess"])
    await _queue(inprocess_api, worker, fine, [f"I collect stamps, album {fine}"])

    assert await worker.run_once()

    # The group's call failed, then each user's texts went alone.
    assert [len(c) for c in pipeline.calls] == [3, 2, 1]
    assert [(t.state, t.attempts) for t in await _tasks(db, fine)] == [("done", 1)]
    assert [m.content for m in await _memories(db, fine)] == [f"I collect stamps, album {fine}"]
    held = await _tasks(db, spoiled)
    assert [(t.state, t.attempts) for t in held] == [("queued", 1), ("queued", 1)]
    assert all("EmbedderAnswerError" in t.last_error for t in held)
    assert await _memories(db, spoiled) == []


async def test_a_worker_dying_between_two_users_transactions_loses_nothing(
    inprocess_api: InProcessApi, db: AsyncEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    lease_s = 2.0
    queue = f"group-{uuid.uuid4().hex[:8]}"
    dying, pipeline = _worker(inprocess_api, queue, monkeypatch, lease_s)
    pipeline.hold = True
    users = _users(2)
    texts = {u: [f"I swim at the lido {u}", f"I run on Sundays {u}"] for u in users}
    for user in users:
        await _queue(inprocess_api, dying, user, texts[user])

    work = asyncio.create_task(dying.run_once())
    # The second user's decision waits: the first user's transaction has committed.
    await asyncio.wait_for(pipeline.holding.wait(), timeout=120)
    work.cancel()  # the worker dies: no give-back, no further write
    await asyncio.gather(work, return_exceptions=True)
    first = pipeline.applied_users[0]
    (second,) = [u for u in users if u != first]
    assert [t.state for t in await _tasks(db, first)] == ["done", "done"]
    # The second user's transaction rolled back: its tasks still leased, nothing written.
    assert [t.state for t in await _tasks(db, second)] == ["running", "running"]
    assert await _memories(db, second) == []

    taking_over, _ = _worker(inprocess_api, queue, monkeypatch, lease_s)
    await asyncio.sleep(lease_s + 0.5)  # the dead worker's lease lapses
    assert await taking_over.run_once()

    for user in users:
        assert [t.state for t in await _tasks(db, user)] == ["done", "done"]
        memories = await _memories(db, user)
        assert sorted(m.content for m in memories) == sorted(texts[user])
        assert all(m.outbox == 1 for m in memories)


async def test_the_texts_a_decision_embeds_come_with_the_claims_one_model_call(
    inprocess_api: InProcessApi, db: AsyncEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A message of several sentences, to a user with a memory: the learned supersedes model
    scores each sentence, whose vectors came with the message's own in the claim's call."""
    worker, pipeline = _worker(inprocess_api, f"group-{uuid.uuid4().hex[:8]}", monkeypatch)
    (user,) = _users(1)
    await _queue(inprocess_api, worker, user, ["We live in Tokyo."])
    assert await worker.run_once()
    sentences = ["We moved to Osaka last month.", "The flat is near the river."]
    await _queue(inprocess_api, worker, user, [" ".join(sentences)])
    pipeline.calls.clear()

    assert await worker.run_once()

    assert [t.state for t in await _tasks(db, user)] == ["done", "done"]
    (call,) = pipeline.calls  # none inside the decision
    assert set(sentences) <= set(call)
    assert " ".join(sentences) in call


async def test_each_fact_is_stored_with_the_vector_its_decision_embedded(
    inprocess_api: InProcessApi, db: AsyncEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The units embedded in the claim's model call for the fact model are the facts' own
    vectors: each fact of a message of several is stored with its unit's vector (no second
    embedding), and, one sentence each, with the empty array of sentence vectors the
    background would store (so it has nothing left to embed)."""
    worker, _ = _worker(inprocess_api, f"group-{uuid.uuid4().hex[:8]}", monkeypatch)
    (user,) = _users(1)
    sentences = ["We moved to Osaka last month.", "My sister visits us every spring."]
    await _queue(inprocess_api, worker, user, [" ".join(sentences), "I keep two cats."])

    assert await worker.run_once()

    expected = await inprocess_api.app.state.runtime.ingest_pipeline.embed(sentences, user)
    stored = await rows(
        db,
        "SELECT content, cardinality(sentence_embeddings_768d) AS n,"
        " 1 - (embedding_768d <=> CAST(:a AS vector)) AS to_first,"
        " 1 - (embedding_768d <=> CAST(:b AS vector)) AS to_second"
        " FROM memories WHERE user_id = :u AND is_current ORDER BY content",
        u=user,
        a=str(list(map(float, expected[0].full))),
        b=str(list(map(float, expected[1].full))),
    )
    assert [(r.content, r.n) for r in stored] == [
        ("I keep two cats.", 0),
        (sentences[1], 0),
        (sentences[0], 0),
    ]
    assert stored[1].to_second > 0.999 and stored[2].to_first > 0.999


async def _delete_all(api: InProcessApi, user_id: str) -> dict[str, Any]:
    """mem0's delete_all of the user, through the in-process API."""
    async with api.client({"X-API-Key": API_KEY}) as http:
        answer = await http.delete("/v1/memories", params={"user_id": user_id})
    assert answer.status_code == 200, answer.text
    return cast(dict[str, Any], answer.json())


async def test_delete_all_cancels_a_message_claimed_but_not_yet_written(
    inprocess_api: InProcessApi, db: AsyncEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    worker, pipeline = _worker(inprocess_api, f"group-{uuid.uuid4().hex[:8]}", monkeypatch)
    (user,) = _users(1)
    await _queue(inprocess_api, worker, user, [f"I keep bees in hive {user}"])
    pipeline.embed_gate = asyncio.Event()
    work = asyncio.create_task(worker.run_once())
    await asyncio.wait_for(pipeline.holding.wait(), timeout=120)
    assert [t.state for t in await _tasks(db, user)] == ["running"]  # claimed, leased

    assert (await _delete_all(inprocess_api, user))["cancelled_messages"] == 1
    pipeline.embed_gate.set()
    await work

    # The worker found the task no longer its own when it came to write: nothing written.
    (task,) = await _tasks(db, user)
    assert task.state == "failed" and task.last_error.startswith("cancelled")
    assert await _memories(db, user) == []


async def test_delete_all_waits_for_a_batch_being_written_and_deletes_its_memories(
    inprocess_api: InProcessApi, db: AsyncEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    worker, pipeline = _worker(inprocess_api, f"group-{uuid.uuid4().hex[:8]}", monkeypatch)
    (user,) = _users(1)
    await _queue(inprocess_api, worker, user, [f"I keep bees in hive {user}"])
    pipeline.decide_gate = asyncio.Event()
    work = asyncio.create_task(worker.run_once())
    await asyncio.wait_for(pipeline.holding.wait(), timeout=120)  # in its transaction

    deleting = asyncio.create_task(_delete_all(inprocess_api, user))

    async def delete_waits_on_the_users_lock() -> bool:
        waiting = await scalar(
            db,
            # The worker holds the user's row of user_locks: the delete waits for it.
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND cardinality(pg_blocking_pids(pid)) > 0",
        )
        return bool(waiting)

    await wait_until(delete_waits_on_the_users_lock, timeout=60, interval=0.05)
    pipeline.decide_gate.set()
    await work
    answer = await deleting

    assert [t.state for t in await _tasks(db, user)] == ["done"]
    assert (answer["deleted"], answer["cancelled_messages"]) == (1, 0)
    assert await _memories(db, user) == []
