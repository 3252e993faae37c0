"""Ingestion's Prometheus counters move with real work: guard rejections and fallbacks."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families

from bench.scripted_llm import Reply, ScriptedLLM
from tests.ingest.helpers import decisions, ingest, message


async def _counter(http: httpx.AsyncClient, name: str, labels: dict[str, str]) -> float:
    text = (await http.get("/metrics")).text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return sample.value
    return 0.0


async def test_guard_rejections_and_fallbacks_are_counted(
    llm: ScriptedLLM,
    llm_client: httpx.AsyncClient,
    user_id: str,
) -> None:
    fallback = {"extractor": "deterministic", "fallback": "true"}
    rejections = "cognis_ingest_llm_answers_total"
    before = await _counter(llm_client, rejections, {"verdict": "rejected"})
    fallbacks_before = await _counter(llm_client, "cognis_ingest_messages_total", fallback)
    text = "I keep a sourdough starter in the fridge"
    llm.script(text, Reply("not json at all"), Reply('{"operations": "none"}'))

    (decision,) = decisions(await ingest(llm_client, user_id, message(text)))

    assert decision["fallback_used"] is True
    assert (
        await _counter(llm_client, rejections, {"verdict": "rejected"}) == before + 2
    )  # the answer and its retry
    assert await _counter(llm_client, "cognis_ingest_messages_total", fallback) == (
        fallbacks_before + 1
    )
