"""What an MCP search result tells the agent of a memory a newer one contradicts (lever
newer_first): compact results say `earlier` and the newer memory's short id; others say
nothing of it."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from cognis_client import Memory, SearchHit, SearchResult
from cognis_client.models import IndexLag

from app.mcp_server.results import search_result, short_id


def _memory(content: str) -> Memory:
    memory_id = uuid.uuid4()
    return Memory(
        id=memory_id,
        user_id="u",
        chain_id=memory_id,
        version=1,
        content=content,
        category="personal_details",
        scope="USER",
        session_id=None,
        is_current=True,
        replaces_id=None,
        speaker=None,
        event_time=None,
        created_at=datetime(2024, 3, 1, tzinfo=UTC),
        superseded_at=None,
        metadata={},
        source_message_id=None,
    )


def test_compact_search_results_mark_the_earlier_fact_with_the_later_ones_short_id() -> None:
    seattle, boston = _memory("I moved to Seattle"), _memory("I live in Boston")
    found = SearchResult(
        results=[
            SearchHit(memory=seattle, rank=1, score=0.9, superseded=False),
            SearchHit(
                memory=boston,
                rank=2,
                score=0.8,
                superseded=False,
                earlier=True,
                later_memory_id=seattle.id,
            ),
        ],
        missing_legs=[],
        stages={},
        stage_durations_ms={},
        duration_ms=1.0,
        index_lag=IndexLag(
            pending=0, oldest_pending_age_ms=None, consistency="eventual", stale=False
        ),
    )
    newer, older = search_result(found, full=False)["results"]
    assert "earlier" not in newer and "later_id" not in newer
    assert older["earlier"] is True and older["later_id"] == short_id(seattle.id)
