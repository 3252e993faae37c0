"""What a search asks (the API's body, checked) and what it answers."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from app.memories.filters import Filter, all_of, visible_to
from app.retrieval.candidates import Candidate
from app.retrieval.plan import StageSwitches
from app.retrieval.query_analysis import QueryAnalysis


@dataclass(frozen=True, slots=True)
class SearchRequest:
    user_id: str
    query: str
    top_k: int
    session_id: str | None = None
    # The agent and run asking: they see their own memories and the shared ones (no agent,
    # no run); None sees all of the user's (app/memories/filters/, visible_to).
    agent_id: str | None = None
    run_id: str | None = None
    as_of: datetime | None = None
    switches: StageSwitches = field(default_factory=StageSwitches)
    profile: str | None = None  # None: settings.retrieval_profile
    levers: Mapping[str, bool] = field(default_factory=dict)  # changes to the profile's levers
    rrf_k: int | None = None
    weight_vector: float | None = None
    weight_bm25: float | None = None
    request_id: str | None = None
    # The search's filter (app/memories/filters/): both legs apply it before ranking.
    filters: Filter | None = None
    # Results below this relevance are left out (None: settings.min_relevance).
    min_relevance: float | None = None
    # The BM25 index's lag behind Postgres for this user, measured by the caller: logged.
    index_lag: dict[str, Any] | None = None

    @property
    def scoped_filter(self) -> Filter | None:
        """The filter both legs apply: the request's, within what its agent and run see."""
        return all_of(self.filters, visible_to(self.agent_id, self.run_id))


@dataclass(slots=True)
class SearchResponse:
    results: list[Candidate]
    analysis: QueryAnalysis
    missing_legs: list[str]
    stage_durations_ms: dict[str, float]
    stage_status: dict[str, str]
    duration_ms: float

    @property
    def sentences_pending(self) -> int:
        """Results the sentence lever ranked without their sentence vectors (not made yet:
        app/memories/sentence_backfill.py): a later search may rank them higher."""
        return sum(c.sentences_pending for c in self.results)
