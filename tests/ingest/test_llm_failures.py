"""A bad LLM answer never loses or corrupts anything: the message is stored, the answer is
retried once, then the deterministic extractor decides and the failure is in the audit log."""

from __future__ import annotations

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.ingest.prompt import INSTRUCTIONS
from bench.scripted_llm import Reply, ScriptedLLM
from tests.ingest.conftest import LLM_TIMEOUT_S
from tests.ingest.helpers import current_memories, decisions, ingest, message, rows, scalar

SEED = "I drive a red bicycle to work"


def _bad_answers(seed_id: str) -> dict[str, tuple[Reply, str]]:
    return {
        "malformed JSON": (Reply('{"operations": [{"op": "ADD", '), "not valid JSON"),
        # What SmolLM2-135M does on the real path: a repetition loop cut off at max_tokens.
        "cut off": (
            Reply(
                '{"operations": [{"op": "ADD", "target": "M1", "content": "M1.M1.M1.M1',
                finish_reason="length",
            ),
            "cut off at the token limit",
        ),
        "unknown target": (
            Reply.ops({"op": "UPDATE", "target": "m7", "content": "Rides a blue bicycle"}),
            "not one of the memories shown",
        ),
        "invented target uuid": (
            Reply.ops(
                {
                    "op": "DELETE",
                    "target": "6f1c0000-0000-4000-8000-000000000000",
                    "reason": "x",
                }
            ),
            "not one of the memories shown",
        ),
        "missing key": (Reply.json({"ops": [{"op": "ADD"}]}), "expected an object"),
        "missing content": (
            Reply.json({"operations": [{"op": "ADD", "category": "hobbies"}]}),
            "'content' is required",
        ),
        "invented category": (
            Reply.ops({"op": "ADD", "content": "Rides a bicycle", "category": "vehicles"}),
            "unknown category",
        ),
        "delete without reason": (
            Reply.ops({"op": "DELETE", "target": "m1"}),
            "'reason' is required",
        ),
        "prompt echo": (
            Reply.ops({"op": "ADD", "content": INSTRUCTIONS[:300], "category": "preferences"}),
            "repeats the instructions",
        ),
        "timeout": (Reply.ops({"op": "NONE"}, delay_s=LLM_TIMEOUT_S + 1.5), "LLM unavailable"),
    }


@pytest.mark.parametrize("case", list(_bad_answers("")))
async def test_bad_answer_falls_back_and_is_audited(
    case: str, llm: ScriptedLLM, llm_client: httpx.AsyncClient, db: AsyncEngine, user_id: str
) -> None:
    llm.script(SEED, Reply.ops({"op": "ADD", "content": SEED, "category": "hobbies"}))
    seeded = decisions(await ingest(llm_client, user_id, message(SEED)))[0]
    reply, expected_failure = _bad_answers(seeded["memory_id"])[case]
    text = "I also take the train on rainy days"
    llm.script(text, reply)

    job = await ingest(llm_client, user_id, message(text))

    (decision,) = decisions(job)
    assert decision["fallback_used"] is True
    assert decision["extractor"] == "deterministic"
    assert decision["operation"] == "ADD"
    assert expected_failure in decision["failure"]
    # The message is stored, and so is the fallback's memory; the seeded memory is untouched.
    assert await scalar(db, "SELECT count(*) FROM messages WHERE user_id = :u", u=user_id) == 2
    contents = sorted(m["content"] for m in await current_memories(llm_client, user_id))
    assert contents == sorted([SEED, text])
    # An invalid answer is asked for again once, with the reason; a transport failure is not.
    attempts = llm.requests_for(text)
    if case == "timeout":
        assert len(attempts) == 1
    else:
        assert len(attempts) == 2
        assert "That answer was rejected" in attempts[1].text
    (audit,) = await rows(
        db,
        "SELECT operation, extractor, fallback_used, failure, model, raw_answer_sha256 "
        "FROM ingest_decisions WHERE message_id = :m AND user_id = :u",
        m=job["messages"][0]["message_id"],
        u=user_id,
    )
    assert audit["fallback_used"] and expected_failure in audit["failure"]
    assert audit["model"] == llm.model
    assert (audit["raw_answer_sha256"] is None) == (case == "timeout")


async def test_a_valid_retry_is_used_and_the_first_failure_kept(
    llm: ScriptedLLM, llm_client: httpx.AsyncClient, user_id: str
) -> None:
    text = "I speak Portuguese fluently"
    llm.script(
        text,
        Reply("not json at all"),
        Reply.ops({"op": "ADD", "content": "Speaks Portuguese", "category": "educational"}),
    )
    job = await ingest(llm_client, user_id, message(text))
    (decision,) = decisions(job)
    assert decision["extractor"] == "llm" and decision["fallback_used"] is False
    assert decision["failure"].startswith("attempt 1: invalid answer: not valid JSON")
    (memory,) = await current_memories(llm_client, user_id)
    assert memory["content"] == "Speaks Portuguese"


async def test_unknown_keys_are_ignored_and_an_empty_answer_is_recorded(
    llm: ScriptedLLM, llm_client: httpx.AsyncClient, user_id: str
) -> None:
    llm.script(
        "Nice weather",
        Reply.json({"operations": [], "thoughts": "small talk, nothing to keep"}),
    )
    job = await ingest(llm_client, user_id, message("Nice weather today, isn't it?"))
    (decision,) = decisions(job)
    assert decision["operation"] == "NONE" and decision["fallback_used"] is False
    assert await current_memories(llm_client, user_id) == []
