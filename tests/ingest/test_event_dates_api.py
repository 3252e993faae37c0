"""One date per fact, through the real API: a message's relative words are resolved once, when
it is ingested, against its time in the sender's offset; search, POST /context, /profile and
MCP then state that one date (app/memories/event_dates.py). Plans point forward."""

from __future__ import annotations

from datetime import datetime

import httpx
import pytest

from tests.conftest import API_KEY, ApiProcess
from tests.ingest.helpers import decisions, ingest, message
from tests.mcp_server.test_mcp_tools import http_session, payload

# Monday 7 December 2026, 10:00 in Seattle.
SAID = "2026-12-07T10:00:00-08:00"


async def _ingested(client: httpx.AsyncClient, user_id: str, content: str) -> dict:
    """The memory the message made, as GET returns it."""
    job = await ingest(client, user_id, message(content, SAID, speaker="Dana"))
    (decision,) = decisions(job)
    assert decision["operation"] == "ADD", decision
    response = await client.get(f"/v1/users/{user_id}/memories/{decision['memory_id']}")
    assert response.status_code == 200, response.text
    return response.json()


def _instant(value: str) -> datetime:
    return datetime.fromisoformat(value)


async def _context(client: httpx.AsyncClient, user_id: str, **body: object) -> dict:
    response = await client.post(f"/v1/users/{user_id}/context", json=body)
    assert response.status_code == 200, response.text
    return response.json()


async def test_last_month_is_one_date_on_every_surface(
    client: httpx.AsyncClient, user_id: str
) -> None:
    memory = await _ingested(client, user_id, "I moved to Seattle last month.")
    # November 2026 in the sender's offset: the month before the message's.
    date = _instant(memory["event_time"])
    assert date == _instant("2026-11-01T00:00:00-08:00")

    response = await client.post(
        f"/v1/users/{user_id}/search",
        json={"query": "Where did I move to?", "consistency": "indexed"},
    )
    assert response.status_code == 200, response.text
    (hit,) = [h for h in response.json()["results"] if h["memory"]["id"] == memory["id"]]
    assert _instant(hit["event_at"]) == date
    assert _instant(hit["memory"]["event_time"]) == date

    # The same date whether the fact is a query's hit or one of the profile's facts (the
    # hit's date used to be "last month" read again against 1 November: 16 October).
    for body in ({"query": "Where did I move to?"}, {}):
        block = await _context(client, user_id, **body)
        (cited,) = [c for c in block["cited"] if c["id"] == memory["id"]]
        assert cited["section"] == ("relevant" if body else "profile")
        assert _instant(cited["date"]) == date
        assert "[2026-11-01]" in block["block"]
        assert "2026-10-" not in block["block"]

    response = await client.get(f"/v1/users/{user_id}/profile")
    assert response.status_code == 200, response.text
    facts = [f for c in response.json()["categories"] for f in c["memories"]]
    (fact,) = [f for f in facts if f["memory"]["id"] == memory["id"]]
    assert _instant(fact["since"]) == date


async def test_mcp_states_the_same_date(api: ApiProcess, user_id: str) -> None:
    async with api.client() as client:
        memory = await _ingested(client, user_id, "I moved to Seattle last month.")
    date = _instant("2026-11-01T00:00:00-08:00")
    headers = {"X-API-Key": API_KEY, "X-Cognis-User": user_id}
    async with http_session(api.url, headers) as mcp:
        found = payload(await mcp.call_tool("search_memories", {"query": "Where did I move?"}))
        (compact,) = [r for r in found["results"] if memory["id"].startswith(r["id"])]
        assert _instant(compact["event_time"]) == date
        assert "event_at" not in compact  # nothing other than event_time to state
        block = payload(await mcp.call_tool("get_context", {"query": "Where did I move?"}))
        assert "[2026-11-01]" in block["block"]


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        # Future tense, "expecting", "going to", "planning", "next": the next May.
        ("We're expecting a second child in May.", "2027-05-01T00:00:00-08:00"),
        ("I'm going to Kyoto in April.", "2027-04-01T00:00:00-08:00"),
        ("I'm planning a trip to Norway in June.", "2027-06-01T00:00:00-08:00"),
        ("My next dentist appointment is on Friday.", "2026-12-11T00:00:00-08:00"),
        # Past tense: the last May.
        ("I went to Lisbon in May.", "2026-05-01T00:00:00-08:00"),
        ("I saw my dentist on Friday.", "2026-12-04T00:00:00-08:00"),
    ],
)
async def test_plans_point_forward_reports_back(
    client: httpx.AsyncClient, user_id: str, content: str, expected: str
) -> None:
    memory = await _ingested(client, user_id, content)
    assert _instant(memory["event_time"]) == _instant(expected)
