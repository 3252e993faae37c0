"""A user's queued messages are claimed together and applied in order (with an LLM, each in a
transaction of its own, its answer asked with none open): each decision sees the previous
one's writes and keeps its own audit rows, the messages' missing vectors come from one model
call, and a poisoned message fails alone."""

from __future__ import annotations

import httpx
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.ingest.corrections import detect_intent
from bench.scripted_llm import Reply, ScriptedLLM
from tests.ingest.helpers import ingest, message, model_counts, rows, wait_job

LISBON = "I live in Lisbon"
PORTO = "I moved to Porto"
CAT = "I adopted a cat named Miso"


def _adds_itself(llm: ScriptedLLM, *texts: str) -> None:
    """Each message becomes one ADD of its own text (no new text for the model to embed)."""
    for content in texts:
        llm.script(content, Reply.ops({"op": "ADD", "content": content, "category": "hobbies"}))


async def _plant(db: AsyncEngine, *statements: str, **params: str) -> None:
    """Change just-submitted rows while the settle delay still holds them back."""
    async with db.begin() as connection:
        for statement in statements:
            await connection.execute(text(statement), params)


async def _tasks(db: AsyncEngine, job_id: str) -> list[dict]:
    return await rows(
        db,
        "SELECT t.state, t.attempts, t.finished_at, m.content FROM ingest_tasks t"
        " JOIN messages m ON m.id = t.message_id WHERE t.job_id = :j ORDER BY t.sent_at",
        j=job_id,
    )


async def test_a_batch_is_decided_in_order_with_one_model_call_a_transaction_a_message(
    llm: ScriptedLLM, llm_client: httpx.AsyncClient, db: AsyncEngine, user_id: str
) -> None:
    _adds_itself(llm, LISBON, CAT)
    llm.script(PORTO, Reply.ops({"op": "UPDATE", "target": "m1", "content": PORTO}))
    job = await ingest(
        llm_client,
        user_id,
        message(LISBON, "2023-04-01T10:00:00Z"),
        message(PORTO, "2023-05-08T10:00:00Z"),
        message(CAT, "2023-06-01T10:00:00Z"),
        wait=False,
    )
    before = await model_counts(llm_client)
    # As messages saved before step 1 kept vectors: the worker must embed all three itself.
    await _plant(
        db,
        "UPDATE messages SET embedding_768d = NULL, embedding_256d = NULL WHERE user_id = :u",
        u=user_id,
    )
    done = await wait_job(llm_client, user_id, job["job_id"])
    after = await model_counts(llm_client)

    assert done["state"] == "done", done
    assert after["batches"] - before["batches"] == 1  # one model call for the batch
    # The three messages, and with them the texts their decisions embed: "moved to" states
    # an update, whose claim ("I live in Porto") the correction rule compares.
    claims = [i.claim for t in (LISBON, PORTO, CAT) if (i := detect_intent(t)) is not None]
    assert claims == ["I live in Porto"]
    assert after["texts"] - before["texts"] == 3 + len(claims)
    tasks = await _tasks(db, job["job_id"])
    assert [t["content"] for t in tasks] == [LISBON, PORTO, CAT]
    # With an LLM, a transaction each (its answer is asked with none open, and a message's
    # transaction ends before the next is asked about): finished one after the other, in order.
    finished = [t["finished_at"] for t in tasks]
    assert len(set(finished)) == 3 and finished == sorted(finished)
    assert [t["attempts"] for t in tasks] == [1, 1, 1]
    # Porto was decided after Lisbon's uncommitted ADD, which it was shown and updated.
    (porto_prompt,) = llm.requests_for(PORTO)
    assert LISBON in porto_prompt.text
    lisbon, porto, cat = (m["decisions"] for m in done["messages"])
    assert [d["operation"] for d in lisbon + porto + cat] == ["ADD", "UPDATE", "ADD"]
    assert porto[0]["target_memory_id"] == lisbon[0]["memory_id"]
    (cat_prompt,) = llm.requests_for(CAT)
    assert PORTO in cat_prompt.text and LISBON not in cat_prompt.text  # superseded by then
    current = await rows(
        db, "SELECT content FROM memories WHERE user_id = :u AND is_current", u=user_id
    )
    assert sorted(m["content"] for m in current) == sorted([PORTO, CAT])


async def test_a_poisoned_message_fails_alone_and_the_rest_of_its_batch_is_applied(
    llm: ScriptedLLM, llm_client: httpx.AsyncClient, db: AsyncEngine, user_id: str
) -> None:
    poison = "I took up pottery last spring"
    good = ["I play the cello", "I swim on Mondays"]
    _adds_itself(llm, poison, *good)
    job = await ingest(
        llm_client, user_id, message(good[0]), message(poison), message(good[1]), wait=False
    )
    # A year-1 timestamp the store refuses (as in test_poisoned_task.py); it now sorts first.
    poisoned = "(SELECT id FROM messages WHERE user_id = :u AND content = :p)"
    await _plant(
        db,
        f"UPDATE messages SET sent_at = '0001-01-01T00:00:00Z' WHERE id = {poisoned}",  # noqa: S608
        f"UPDATE ingest_tasks SET sent_at = '0001-01-01T00:00:00Z' WHERE message_id = {poisoned}",  # noqa: S608
        u=user_id,
        p=poison,
    )
    finished = await wait_job(llm_client, user_id, job["job_id"])

    assert finished["state"] == "failed", finished
    tasks = await _tasks(db, job["job_id"])
    assert [(t["content"], t["state"], t["attempts"]) for t in tasks] == [
        (poison, "failed", 1),  # not retried
        (good[0], "done", 1),
        (good[1], "done", 1),
    ]
    finished = [t["finished_at"] for t in tasks]  # each in its own transaction (an LLM), in order
    assert len(set(finished)) == 3 and finished == sorted(finished)
    memories = await rows(db, "SELECT content FROM memories WHERE user_id = :u", u=user_id)
    assert sorted(m["content"] for m in memories) == sorted(good)
