"""Stage 7: cross-encoder re-ranking of the top candidates."""

from __future__ import annotations

from app.ml.cross_encoder import CrossEncoderScorer
from app.retrieval.candidates import Candidate


async def rerank(
    query: str, ranked: list[Candidate], scorer: CrossEncoderScorer, top_n: int
) -> list[Candidate]:
    """Re-score the first `top_n` by the cross-encoder and sort them by it; the rest follow
    in their previous order (the cross-encoder never saw them, so they cannot overtake)."""
    head, tail = ranked[:top_n], ranked[top_n:]
    texts = [c.memory.content if c.memory is not None else "" for c in head]
    scores = await scorer.score(query, texts)
    for candidate, score in zip(head, scores, strict=True):
        candidate.score = score
    head = sorted(head, key=lambda c: -c.score)
    for position, candidate in enumerate(head, start=1):
        candidate.record("rerank", position, candidate.score)
    if head and tail:
        # Keep the tail strictly below the head on the new scale.
        floor = min(c.score for c in head)
        for offset, candidate in enumerate(tail, start=1):
            candidate.score = floor - offset
    return head + tail
