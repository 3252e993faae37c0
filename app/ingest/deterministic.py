"""The extractor without an LLM (and the LLM's fallback): every user message becomes a memory,
categorised by the example-trained classifier (app/ml/categories.py); a near-duplicate of a
current memory is NONE, and an explicit correction or retraction of one current memory
(app/ingest/corrections.py, found by the caller) is its UPDATE or DELETE."""

from __future__ import annotations

from app.ingest.corrections import Correction
from app.ingest.domain import Candidate, Extraction, MessageContext, Operation
from app.ml.categories import CategoryClassifier
from app.ml.embedder import Embedding


async def extract_deterministic(
    context: MessageContext,
    candidates: list[Candidate],
    embedding: Embedding,
    classifier: CategoryClassifier,
    duplicate_threshold: float,
    correction: Correction | None = None,
) -> Extraction:
    if context.role != "user":
        operation = Operation(op="NONE", reason=f"{context.role} messages are not stored")
        return Extraction(operations=[operation], extractor="deterministic")
    nearest = max(candidates, key=lambda c: c.similarity, default=None)
    if nearest is not None and nearest.similarity >= duplicate_threshold:
        operation = Operation(
            op="NONE",
            target=nearest,
            reason=f"near-duplicate of a current memory (cosine {nearest.similarity:.3f})",
        )
        return Extraction(operations=[operation], extractor="deterministic")
    if correction is not None:
        intent = correction.intent
        operation = Operation(
            op=intent.op,
            content=intent.content,
            scope=correction.target.scope,
            target=correction.target,
            reason=correction.reason,
            event_time=context.event_time if intent.op == "UPDATE" else None,
        )
        return Extraction(operations=[operation], extractor="deterministic")
    (category,) = await classifier.classify([embedding.full], [context.content])
    operation = Operation(
        op="ADD",
        content=context.content,
        category=category,
        scope=context.scope or "USER",
        event_time=context.event_time,
    )
    return Extraction(operations=[operation], extractor="deterministic")
