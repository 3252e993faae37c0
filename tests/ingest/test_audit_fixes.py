"""Correctness of step 2's clock and of what jobs and dry runs report (issue 11, item 5)."""

from __future__ import annotations

from datetime import datetime

import httpx

from app.retrieval.query_analysis import analyze_query
from tests.ingest.helpers import current_memories, decisions, ingest, message

# 01:00 on 8 May in Tokyo is still 7 May in UTC: "yesterday" means 7 May to the sender.
SENT_IN_TOKYO = "2023-05-08T01:00:00+09:00"


async def test_yesterday_resolves_in_the_senders_offset(
    client: httpx.AsyncClient, user_id: str
) -> None:
    job = await ingest(client, user_id, message("I ran a half marathon yesterday", SENT_IN_TOKYO))
    (decision,) = decisions(job)
    (memory,) = await current_memories(client, user_id)
    event_time = datetime.fromisoformat(memory["event_time"])
    # 7 May 00:00 in Tokyo, stored as an instant (15:00 UTC on 6 May).
    assert event_time == datetime.fromisoformat("2023-05-07T00:00:00+09:00")
    # The window search computes for the same words at the same moment holds the memory.
    window = analyze_query("what did I do yesterday?", datetime.fromisoformat(SENT_IN_TOKYO))
    assert window.window is not None
    assert window.window.start <= event_time < window.window.end
    # The job reports the event time the memory got (it used to be always null).
    assert decision["event_time"] is not None
    assert datetime.fromisoformat(decision["event_time"]) == event_time


async def test_job_decisions_carry_the_memorys_event_time(
    client: httpx.AsyncClient, user_id: str
) -> None:
    job = await ingest(client, user_id, message("I adopted a dog", "2024-02-10T12:00:00Z"))
    (decision,) = decisions(job)
    (memory,) = await current_memories(client, user_id)
    assert decision["event_time"] == memory["event_time"]
    assert memory["event_time"].startswith("2024-02-10T12:00:00")


async def test_dry_run_decisions_name_their_extractor(
    client: httpx.AsyncClient, user_id: str
) -> None:
    response = await client.post(
        f"/v1/users/{user_id}/messages",
        params={"dry_run": "true"},
        json={"messages": [message("I play the cello", "2023-01-05T08:00:00Z")]},
    )
    assert response.status_code == 200, response.text
    (result,) = response.json()["messages"]
    (decision,) = result["decisions"]
    assert result["extractor"] == "deterministic"
    assert decision["extractor"] == "deterministic"
    assert decision["fallback_used"] is False
