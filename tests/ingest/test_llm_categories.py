"""The category rule at ingestion's door (the scripted LLM): the LLM is shown the deployment's
categories of the moment, its answer is held to them, and an UPDATE that names no category
keeps the memory's own."""

from __future__ import annotations

import httpx
from sqlalchemy.ext.asyncio import AsyncEngine

from bench.scripted_llm import Reply, ScriptedLLM
from tests.factories import deployment_category
from tests.ingest.helpers import current_memories, decisions, ingest, message


async def test_the_llm_files_under_a_deployments_category_and_an_update_keeps_it(
    llm: ScriptedLLM, llm_client: httpx.AsyncClient, db: AsyncEngine, user_id: str
) -> None:
    async with deployment_category(db, llm_client, user_id) as custom:
        llm.script(
            "I keep bees on my roof",
            Reply.ops({"op": "ADD", "content": "Keeps bees on the roof", "category": custom}),
        )
        llm.script(
            "The hives moved to the garden",
            Reply.ops({"op": "UPDATE", "target": "m1", "content": "Keeps bees in the garden"}),
        )
        added = decisions(await ingest(llm_client, user_id, message("I keep bees on my roof")))
        assert [(d["operation"], d["category"]) for d in added] == [("ADD", custom)]
        # The row added a moment ago was in the list the LLM was shown.
        (prompt,) = llm.requests_for("I keep bees on my roof")
        assert custom in prompt.text

        updated = decisions(
            await ingest(llm_client, user_id, message("The hives moved to the garden"))
        )
        # No category in the answer: the new version keeps the memory's, and says so.
        assert [(d["operation"], d["category"]) for d in updated] == [("UPDATE", custom)]
        (memory,) = await current_memories(llm_client, user_id)
        assert (memory["content"], memory["category"]) == ("Keeps bees in the garden", custom)


async def test_an_invented_category_is_refused_naming_the_deployments_own(
    llm: ScriptedLLM, llm_client: httpx.AsyncClient, db: AsyncEngine, user_id: str
) -> None:
    async with deployment_category(db, llm_client, user_id) as custom:
        text = "I read my horoscope every morning"
        invented = Reply.ops({"op": "ADD", "content": "Reads horoscopes", "category": "astrology"})
        llm.script(text, invented, invented)
        (decision,) = decisions(await ingest(llm_client, user_id, message(text)))
        # Asked again once with the reason, then the extractor without an LLM decided.
        assert decision["fallback_used"] is True and decision["extractor"] == "deterministic"
        assert "unknown category 'astrology'" in decision["failure"]
        retry = llm.requests_for(text)[1].text
        assert "unknown category 'astrology'" in retry and custom in retry
        (memory,) = await current_memories(llm_client, user_id)
        assert memory["category"] == decision["category"] != "astrology"
