"""Stage 5: temporal boost, for queries whose analysis resolved a time window.

temporal_score = max(floor, 1 - |t_event - t_query| / window_days)
final          = w_fused * fused_normalised + w_time * temporal_score

Choices (documented in docs/retrieval.md): t_query is the centre of the resolved window and
window_days its length in days (at least one day), so a memory inside the window scores at
least 0.5 and the score falls linearly to the floor about one window-length away. Fused RRF
scores are at most ~0.09, so they are divided by the best fused score first: without that the
0.40 time term would swamp the 0.60 relevance term. A memory without an event time uses the
time it was learned (created_at).
"""

from __future__ import annotations

from datetime import datetime

from app.retrieval.candidates import Candidate, rank_by_score
from app.time_expressions import TimeWindow

SECONDS_PER_DAY = 86_400.0


def temporal_score(event_time: datetime, window: TimeWindow, floor: float) -> float:
    t_query = window.center
    window_days = max(window.days, 1.0)
    distance_days = abs((event_time - t_query).total_seconds()) / SECONDS_PER_DAY
    return max(floor, 1.0 - distance_days / window_days)


def apply_temporal_boost(
    candidates: list[Candidate],
    window: TimeWindow,
    weight_fused: float,
    weight_time: float,
    floor: float,
) -> list[Candidate]:
    """Re-score loaded candidates; returns them re-ranked, recording stage "temporal"."""
    if not candidates:
        return []
    best = max(c.score for c in candidates) or 1.0
    for candidate in candidates:
        assert candidate.when is not None, "temporal boost needs loaded memories"
        time_part = temporal_score(candidate.when, window, floor)
        candidate.score = weight_fused * (candidate.score / best) + weight_time * time_part
    return rank_by_score(candidates, "temporal")
