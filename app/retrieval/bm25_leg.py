"""Stage 3: BM25 from OpenSearch, always filtered by user; None when OpenSearch cannot answer
(the pipeline then reports the leg missing and fuses what it has)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import structlog
from opensearchpy.exceptions import TransportError

from app.ml.language import detect_language
from app.retrieval.timing import StageTimer
from app.search_index.client import UNAVAILABLE, MemoryIndex, TextHit

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class Bm25LegSettings:
    size: int  # bm25_candidates
    context_boost: float  # 0: the content field alone
    proximity_slop: int | None = None  # lever bm25_proximity: None switches it off


async def bm25_leg(
    index: MemoryIndex,
    user_id: str,
    query: str,
    session_id: str | None,
    options: Bm25LegSettings,
    timer: StageTimer,
    matching: dict[str, Any] | None = None,
) -> list[TextHit] | None:
    with timer.stage("bm25_ms"):
        try:
            return await index.search_bm25(
                user_id,
                query,
                options.size,
                session_id,
                options.context_boost,
                options.proximity_slop,
                matching,
                # The query's language chooses the analysis its words are matched in.
                language=detect_language(query),
            )
        except (*UNAVAILABLE, TransportError) as exc:
            log.warning("retrieval.bm25_unavailable", error=str(exc))
            return None
