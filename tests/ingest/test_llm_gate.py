"""The LLM gate (behind the default threshold), prompt versions in the audit trail, and the
guard's verdicts counted in /metrics."""

from __future__ import annotations

import re

import httpx

from app.ingest.prompt import PROMPT_VERSION
from bench.scripted_llm import Reply, ScriptedLLM
from tests.ingest.helpers import current_memories, decisions, ingest, message


def _decision_requests(llm: ScriptedLLM, text: str) -> list:
    """Requests for an ADD/UPDATE/DELETE/NONE decision about `text`."""
    return [r for r in llm.requests_for(text) if "Existing memories:" in r.text]


async def _counter(client: httpx.AsyncClient, name: str, label: str) -> float:
    text = (await client.get("/metrics")).text
    match = re.search(rf"^{name}\{{[^}}]*{label}[^}}]*\}} (\S+)$", text, re.MULTILINE)
    return float(match.group(1)) if match else 0.0


async def test_a_message_with_no_close_memory_is_decided_without_a_call(
    llm: ScriptedLLM, gated_client: httpx.AsyncClient, user_id: str
) -> None:
    skipped_before = await _counter(gated_client, "cognis_ingest_llm_gate_total", 'verdict="skip"')
    job = await ingest(gated_client, user_id, message("I keep bees on my roof"))
    (decision,) = decisions(job)
    assert _decision_requests(llm, "I keep bees") == []
    assert decision["operation"] == "ADD" and decision["extractor"] == "deterministic"
    assert decision["llm_gate"] == "skip" and decision["gate_similarity"] is None
    assert decision["prompt_version"] is None  # no prompt was shown
    (memory,) = await current_memories(gated_client, user_id)
    assert memory["content"] == "I keep bees on my roof"
    # Far from the bees: still no call, and the similarity judged is recorded.
    job = await ingest(gated_client, user_id, message("My sister works in a bank in Lima"))
    (far,) = decisions(job)
    assert far["llm_gate"] == "skip" and far["gate_similarity"] < 0.3
    assert _decision_requests(llm, "My sister") == []
    skipped_after = await _counter(gated_client, "cognis_ingest_llm_gate_total", 'verdict="skip"')
    assert skipped_after - skipped_before == 2


async def test_a_close_memory_opens_the_gate_and_the_prompt_version_is_recorded(
    llm: ScriptedLLM, gated_client: httpx.AsyncClient, user_id: str
) -> None:
    await ingest(gated_client, user_id, message("I live in Tokyo", "2023-04-01T10:00:00Z"))
    llm.script(
        "I moved to Osaka",
        Reply.ops({"op": "UPDATE", "target": "m1", "content": "Lives in Osaka"}),
    )
    job = await ingest(gated_client, user_id, message("I moved to Osaka", "2023-05-08T10:00:00Z"))
    (decision,) = decisions(job)
    assert len(_decision_requests(llm, "I moved to Osaka")) == 1
    assert decision["operation"] == "UPDATE" and decision["extractor"] == "llm"
    assert decision["llm_gate"] == "call" and decision["gate_similarity"] >= 0.3
    assert decision["prompt_version"] == PROMPT_VERSION


async def test_rejected_answers_are_counted_and_never_stored(
    llm: ScriptedLLM, gated_client: httpx.AsyncClient, user_id: str
) -> None:
    await ingest(gated_client, user_id, message("I work as a nurse"))
    # A target that was never shown, twice: both answers rejected, then the fallback.
    bad = Reply.ops({"op": "DELETE", "target": "m7", "reason": "gone"})
    llm.script("I work as a nurse at night", bad)
    rejected = await _counter(gated_client, "cognis_ingest_llm_answers_total", 'verdict="rejected"')
    fallbacks = await _counter(
        gated_client, "cognis_ingest_llm_fallbacks_total", 'cause="invalid_answer"'
    )
    job = await ingest(gated_client, user_id, message("I work as a nurse at night"))
    (decision,) = decisions(job)
    assert decision["llm_gate"] == "call" and decision["fallback_used"] is True
    assert "is not one of the memories shown" in decision["failure"]
    assert decision["prompt_version"] == PROMPT_VERSION
    assert (
        await _counter(gated_client, "cognis_ingest_llm_answers_total", 'verdict="rejected"')
        == rejected + 2
    )
    assert (
        await _counter(gated_client, "cognis_ingest_llm_fallbacks_total", 'cause="invalid_answer"')
        == fallbacks + 1
    )
    # Nothing was deleted: both memories are current.
    contents = {m["content"] for m in await current_memories(gated_client, user_id)}
    assert "I work as a nurse" in contents
