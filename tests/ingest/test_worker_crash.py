"""A worker killed mid-task: its lease, renewed while it worked and short, runs out within
seconds, and another worker completes the task (not after the old 300 s lease)."""

from __future__ import annotations

import asyncio
import os
import signal
import uuid

from sqlalchemy import text

from app.config import SETTING_FIELDS
from bench.scripted_llm import Reply, ScriptedLLM
from tests.conftest import ApiProcess, wait_until

QUEUE = "crash-tests"


def _worker_env(migrated: dict[str, str], llm: ScriptedLLM) -> dict[str, str]:
    return {
        **migrated,
        "COGNIS_LLM_BASE_URL": llm.base_url,
        "COGNIS_LLM_MODEL": llm.model,
        "COGNIS_LLM_API_KEY": "test-llm-key",
        "COGNIS_LLM_TIMEOUT_S": "120",
        "COGNIS_LLM_MAX_RETRIES": "0",
        "COGNIS_INGEST_QUEUE": QUEUE,
        "COGNIS_INGEST_SETTLE_MS": "0",
        "COGNIS_INGEST_POLL_INTERVAL_S": "0.2",
        "COGNIS_RELAY_IN_API": "false",
        # Every message goes to the LLM (the gate would skip a new user's first message), and
        # the LLM is asked about nothing else (no uncertain categories).
        "COGNIS_INGEST_LLM_GATE_THRESHOLD": "0",
        "COGNIS_CATEGORY_UNCERTAIN_MARGIN": "0",
    }


async def _task(db, message_id: str) -> dict:
    async with db.connect() as connection:
        row = (
            await connection.execute(
                text(
                    "SELECT state, attempts, lease_expires_at,"
                    " extract(epoch FROM lease_expires_at - now()) AS lease_left_s"
                    " FROM ingest_tasks WHERE message_id = :m"
                ),
                {"m": message_id},
            )
        ).one()
    return dict(row._mapping)


async def test_crashed_workers_task_is_taken_over_once_its_short_lease_lapses(
    migrated, llm: ScriptedLLM, db, user_id
) -> None:
    lease_s = SETTING_FIELDS["ingest_lease_s"].default
    heartbeat_s = SETTING_FIELDS["ingest_heartbeat_s"].default
    marker = f"I keep bees, hive {uuid.uuid4().hex[:8]}"
    # The first worker's LLM call stalls far longer than the test waits; the next one answers.
    llm.script(
        marker,
        Reply.ops({"op": "ADD", "content": marker, "category": "hobbies"}, delay_s=600),
        Reply.ops({"op": "ADD", "content": marker, "category": "hobbies"}),
    )
    first = ApiProcess(_worker_env(migrated, llm), "api-crash-first")
    second = None
    try:
        await asyncio.to_thread(first.wait_ready)
        async with first.client() as http:
            response = await http.post(
                f"/v1/users/{user_id}/messages", json={"messages": [{"content": marker}]}
            )
        assert response.status_code == 202, response.text
        message_id = response.json()["messages"][0]["message_id"]

        async def leased():
            task = await _task(db, message_id)
            return task if task["state"] == "running" and llm.requests_for(marker) else None

        claimed = await wait_until(leased, timeout=120)
        # The lease is short, and renewed while the LLM call runs.
        assert claimed["lease_left_s"] <= lease_s
        await asyncio.sleep(heartbeat_s * 2.5)
        renewed = await _task(db, message_id)
        assert renewed["state"] == "running" and renewed["attempts"] == 1
        assert renewed["lease_expires_at"] > claimed["lease_expires_at"]

        os.kill(first.process.pid, signal.SIGKILL)
        await asyncio.to_thread(first.process.wait)
        second = ApiProcess(_worker_env(migrated, llm), "api-crash-second")
        await asyncio.to_thread(second.wait_ready)

        async def done():
            task = await _task(db, message_id)
            return task if task["state"] == "done" else None

        finished = await wait_until(done, timeout=lease_s + 60)
        assert finished["attempts"] == 2
        assert len(llm.requests_for(marker)) == 2
        async with db.connect() as connection:
            stored = await connection.scalar(
                text("SELECT count(*) FROM memories WHERE user_id = :u AND content = :c"),
                {"u": user_id, "c": marker},
            )
        assert stored == 1
    finally:
        first.stop()
        if second is not None:
            second.stop()
