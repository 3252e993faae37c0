"""The real local LLM path end to end: xllamacpp serving SmolLM2-135M (scripts/install-llm.sh
provides both), a schema-constrained request, the guard, the write and the audit row.

SmolLM2-135M is far too small to decide well: these tests assert structure and the guard's
behaviour, never decision quality. Whatever it answers is either accepted by the guard (and then
valid) or rejected and replaced by the extractor without an LLM: a bad answer is never stored.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.config import Settings
from app.ingest.context import message_context
from app.ingest.domain import IncomingMessage
from app.ingest.guard import AnswerGuard, InvalidAnswer, repeats_prompt
from app.ingest.prompt import PROMPT_VERSION, chat_messages, operation_schema
from app.llm.client import ChatClient
from app.vocabulary import OPERATIONS, SEED_CATEGORIES
from bench.ports import free_port
from tests.conftest import LOG_DIR, ApiProcess
from tests.ingest.helpers import current_memories, decisions, ingest, message, rows
from tests.services import CACHE_DIR, ROOT

# `make test-fast` leaves these out: they start a local LLM server (a model load).
pytestmark = pytest.mark.services

GGUF = Path(
    os.environ.get("COGNIS_TEST_LLM_GGUF", CACHE_DIR / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf")
)
# A tiny model on a shared CPU: generous, and short answers.
TIMEOUT_S = 180
MAX_TOKENS = 150


@pytest.fixture(scope="module")
def local_llm_url() -> Iterator[str]:
    if not GGUF.is_file():
        pytest.skip(f"{GGUF} is missing: run scripts/install-llm.sh (make install-test does)")
    port = free_port()
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    log_path = LOG_DIR / "test-local-llm.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("COGNIS_")}
    env["OMP_WAIT_POLICY"] = "PASSIVE"
    with log_path.open("w") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "app", "llm-serve", "--gguf", str(GGUF), "--port", str(port)],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            deadline = time.monotonic() + 300
            while True:
                assert process.poll() is None, log_path.read_text()[-3000:]
                try:
                    if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                assert time.monotonic() < deadline, "local LLM not ready in 300 s"
                time.sleep(0.5)
            yield f"http://127.0.0.1:{port}/v1"
        finally:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()


@pytest.fixture(scope="module")
def local_llm_api(migrated: dict[str, str], local_llm_url: str) -> Iterator[ApiProcess]:
    env = {
        **migrated,
        "COGNIS_LLM_BASE_URL": local_llm_url,
        "COGNIS_LLM_MODEL": "local",
        "COGNIS_LLM_TIMEOUT_S": str(TIMEOUT_S),
        "COGNIS_LLM_MAX_RETRIES": "0",
        "COGNIS_LLM_MAX_TOKENS": str(MAX_TOKENS),
        # The gate open: every message is put to the model.
        "COGNIS_INGEST_LLM_GATE_THRESHOLD": "0",
        "COGNIS_INGEST_QUEUE": "local-llm-tests",
        "COGNIS_INGEST_WAIT_TIMEOUT_S": "900",
        "COGNIS_INGEST_POLL_INTERVAL_S": "0.2",
    }
    process = ApiProcess(env, "api-local-llm")
    process.wait_ready()
    yield process
    process.stop()


@pytest.fixture
async def local_client(local_llm_api: ApiProcess) -> AsyncIterator[httpx.AsyncClient]:
    async with local_llm_api.client(timeout=1000) as http:
        yield http


async def test_a_schema_constrained_answer_is_json_of_the_schema(local_llm_url: str) -> None:
    settings = Settings(
        database_url="postgresql+asyncpg://unused/unused",  # type: ignore[arg-type]
        llm_base_url=local_llm_url,
        llm_model="local",
        llm_timeout_s=TIMEOUT_S,
        llm_max_tokens=MAX_TOKENS,
        llm_response_format="json_schema",
    )
    context = message_context(
        "u-local", None, IncomingMessage("I live in Tokyo", sent_at=datetime.now(UTC)), None
    )
    client = ChatClient(settings.llm)
    try:
        completion = await client.complete_json(
            chat_messages(context, [], SEED_CATEGORIES), operation_schema(SEED_CATEGORIES)
        )
    finally:
        await client.close()
    assert completion.model  # the server names the model it ran
    # The grammar admits only the schema, so even a cut-off answer is a prefix of one.
    assert re.match(r'\s*\{\s*"operations"\s*:\s*\[', completion.content)
    if completion.finish_reason == "length":
        # A repetition loop ran into max_tokens (SmolLM2 does this): not closed, not JSON, and
        # the extractor rejects it before the guard (tests/ingest/test_llm_failures.py).
        with pytest.raises(ValueError):
            json.loads(completion.content)
        return
    answer = json.loads(completion.content)
    assert set(answer) == {"operations"} and isinstance(answer["operations"], list)
    for item in answer["operations"]:
        assert item["op"] in OPERATIONS
        assert item["category"] is None or item["category"] in SEED_CATEGORIES
    # Valid JSON of the right shape can still be a bad decision: the guard judges it.
    guard = AnswerGuard(context, [], SEED_CATEGORIES, max_content_chars=2000)
    try:
        operations = guard.parse(completion.content)
    except InvalidAnswer as exc:
        assert str(exc)
    else:
        assert all(op.target is None for op in operations)  # no memory was shown


async def test_decisions_go_through_the_guard_and_into_the_audit_trail(
    local_client: httpx.AsyncClient, db: AsyncEngine, user_id: str
) -> None:
    texts = ["I live in Tokyo and I work as a nurse", "I moved to Osaka last week"]
    jobs = [await ingest(local_client, user_id, message(t)) for t in texts]
    made = [d for job in jobs for d in decisions(job)]
    assert made
    for decision in made:
        assert decision["llm_gate"] == "call" and decision["prompt_version"] == PROMPT_VERSION
        assert decision["model"] == "local"
        if decision["fallback_used"]:
            # Rejected (or no answer): the extractor without an LLM decided, and says why.
            assert decision["extractor"] == "deterministic"
            assert "invalid answer" in decision["failure"] or "unavailable" in decision["failure"]
        else:
            assert decision["extractor"] == "llm" and decision["operation"] in OPERATIONS
            assert len(decision["raw_answer_sha256"]) == 64
    memories = await current_memories(local_client, user_id)
    history = await rows(
        db, "SELECT id, content, category FROM memories WHERE user_id = :u", u=user_id
    )
    by_id = {str(r["id"]): r for r in history}
    for decision in made:
        # Every id a decision names is this user's memory (never one it was not shown).
        for key in ("memory_id", "target_memory_id"):
            if decision[key] is not None:
                assert decision[key] in by_id
        if decision["fallback_used"] and decision["operation"] == "ADD":
            assert by_id[decision["memory_id"]]["content"] in texts
    for memory in memories:
        assert memory["content"].strip() and memory["category"] in SEED_CATEGORIES
        assert not repeats_prompt(memory["content"], " ".join(texts))
    audit = await rows(
        db,
        "SELECT count(*) AS n, count(prompt_version) AS versioned FROM ingest_decisions "
        "WHERE user_id = :u",
        u=user_id,
    )
    assert audit[0]["n"] == len(made) and audit[0]["versioned"] == len(made)
