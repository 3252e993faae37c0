"""An LLM's answer asked with no transaction open is applied only to what it was shown
(app/ingest/llm_answer.py): a write that changes the message's candidate memories while the
LLM answers makes the answer stale, and the message is asked about again; when they keep
changing, the deterministic extractor decides, recorded as a fallback."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from app.config import LlmSettings
from app.db.tenant import DEFAULT_TENANT_ID, tenant_scope
from app.ingest.domain import IncomingMessage
from app.llm.client import ChatClient
from bench.scripted_llm import Reply, ScriptedLLM
from tests.factories import create_memory
from tests.ingest.helpers import ingestion_on

QUEUE = "llm-answers"
PIANO = "I play the piano."
CELLO = "I switched from the piano to the cello last spring."


@pytest.fixture
async def chat(llm: ScriptedLLM):  # type: ignore[no-untyped-def]
    client = ChatClient(
        LlmSettings(llm_base_url=llm.base_url, llm_model=llm.model, llm_max_retries=0)
    )
    yield client
    await client.close()


async def _ingest_while_writing(
    client, inprocess_api, user_id, llm, chat, monkeypatch, writes: int
):  # type: ignore[no-untyped-def]
    """CELLO through the worker, while the piano memory is rewritten through the API during
    the first `writes` answers of the LLM (as a PATCH racing the worker would)."""
    piano = await create_memory(client, user_id, PIANO)
    llm.script(CELLO, Reply.ops({"op": "UPDATE", "target": "m1", "content": CELLO}))
    complete_json = chat.complete_json
    rewritten = iter(f"I play the piano, lesson {n}." for n in range(1, writes + 1))

    async def answering_while_a_write_lands(*args, **kwargs):  # type: ignore[no-untyped-def]
        answer = await complete_json(*args, **kwargs)
        if (content := next(rewritten, None)) is not None:
            url = f"/v1/users/{user_id}/memories/{piano['id']}"
            assert (await client.patch(url, json={"content": content})).status_code == 200
        return answer

    monkeypatch.setattr(chat, "complete_json", answering_while_a_write_lands)
    runtime = inprocess_api.app.state.runtime
    service, worker = ingestion_on(
        runtime,
        runtime.background_sessionmaker,
        runtime.embedder,
        QUEUE,
        chat,
        ingest_llm_gate_threshold=0.0,
    )
    with tenant_scope(DEFAULT_TENANT_ID):
        job_id, _ = await service.submit(user_id, [IncomingMessage(CELLO, datetime.now(UTC))])
        while await worker.run_once():
            pass
        view = await service.read_job(user_id, job_id)
    assert view.state == "done", [t.last_error for t in view.tasks]
    (decisions,) = view.decisions.values()
    return piano, decisions


async def test_an_answer_made_stale_by_a_write_is_asked_again_about_what_is_current(
    client, inprocess_api, user_id, llm, chat, monkeypatch
) -> None:
    piano, decisions = await _ingest_while_writing(
        client, inprocess_api, user_id, llm, chat, monkeypatch, writes=1
    )
    first, second = llm.requests_for(CELLO)
    assert PIANO in first.text and "lesson 1" not in first.text
    assert "I play the piano, lesson 1." in second.text  # shown what is current now
    (decision,) = decisions
    assert (decision.operation, decision.extractor, decision.fallback_used) == (
        "UPDATE",
        "llm",
        False,
    )
    current = await client.get(f"/v1/users/{user_id}/memories/{piano['id']}")
    assert current.json()["content"] == CELLO


async def test_answers_that_keep_going_stale_leave_the_message_to_the_deterministic_rules(
    client, inprocess_api, user_id, llm, chat, monkeypatch
) -> None:
    _, decisions = await _ingest_while_writing(
        client, inprocess_api, user_id, llm, chat, monkeypatch, writes=10
    )
    asked = len(llm.requests_for(CELLO))
    assert asked == 3  # ASK_AGAIN + 1 answers, each stale by the time it would apply
    assert decisions and all(d.extractor == "deterministic" and d.fallback_used for d in decisions)
    assert "changed while the LLM answered, 3 times" in (decisions[0].failure or "")
