"""A task whose input can never be stored fails at its first attempt instead of being retried
five times while the user's later messages wait behind it."""

from __future__ import annotations

import httpx
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from bench.scripted_llm import Reply, ScriptedLLM
from tests.ingest.helpers import ingest, message, rows, wait_job

POISON = "I took up pottery last spring"


async def test_a_permanent_input_error_is_not_retried(
    llm: ScriptedLLM, llm_client: httpx.AsyncClient, db: AsyncEngine, user_id: str
) -> None:
    llm.script(POISON, Reply.ops({"op": "ADD", "content": POISON, "category": "hobbies"}))
    job = await ingest(llm_client, user_id, message(POISON), wait=False)
    # A year-1 timestamp, as the API accepted before it checked (the settle delay holds the task
    # back long enough to plant it).
    async with db.begin() as connection:
        for table in ("messages", "ingest_tasks"):
            await connection.execute(
                text(f"UPDATE {table} SET sent_at = '0001-01-01T00:00:00Z' WHERE user_id = :u"),  # noqa: S608
                {"u": user_id},
            )
    failed = await wait_job(llm_client, user_id, job["job_id"])
    assert failed["state"] == "failed", failed
    (task,) = failed["messages"]
    assert task["attempts"] == 1, task
    assert "year 1 is out of range" in task["last_error"]
    # The user's next message is not held up behind it.
    later = await ingest(llm_client, user_id, message("I adopted a dog named Rex"))
    assert later["state"] == "done"
    memories = await rows(db, "SELECT content FROM memories WHERE user_id = :u", u=user_id)
    assert POISON not in [m.content for m in memories]
