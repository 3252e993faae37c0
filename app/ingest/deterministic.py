"""The extractor without an LLM (and the LLM's fallback): every user message becomes a memory,
categorised by the example-trained classifier (app/ml/categories.py); a near-duplicate of a
current memory is NONE, an explicit correction or retraction of one current memory
(app/ingest/corrections.py, found by the caller) is its UPDATE or DELETE, and else a sentence
the learned supersedes model matches with one current memory (app/ingest/supersedes.py, found
by the caller) is its UPDATE, the message's other sentences a new memory."""

from __future__ import annotations

from app.ingest.corrections import Correction
from app.ingest.domain import Candidate, Extraction, MessageContext, Operation
from app.ingest.supersedes import Supersession
from app.ml.categories import CategoryClassifier
from app.ml.embedder import Embedding


async def extract_deterministic(
    context: MessageContext,
    candidates: list[Candidate],
    embedding: Embedding,
    classifier: CategoryClassifier,
    duplicate_threshold: float,
    correction: Correction | None = None,
    supersession: Supersession | None = None,
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
            # A new version is what the user said, as said: never an edited copy of the old one.
            content=context.content.strip() if intent.op == "UPDATE" else None,
            scope=correction.target.scope,
            target=correction.target,
            reason=correction.reason,
            event_time=context.event_time if intent.op == "UPDATE" else None,
        )
        return Extraction(operations=[operation], extractor="deterministic")
    operations: list[Operation] = []
    added: str | None = context.content
    if supersession is not None:
        operations.append(
            Operation(
                op="UPDATE",
                content=supersession.sentence,
                scope=supersession.target.scope,
                target=supersession.target,
                reason=supersession.reason,
                event_time=context.event_time,
            )
        )
        added = supersession.rest  # the message's other facts stay, as a memory of their own
    if added is not None:
        # The message's embedding judges the category of what remains of it, too.
        (category,) = await classifier.classify([embedding.full], [added])
        operations.append(
            Operation(
                op="ADD",
                content=added,
                category=category,
                scope=context.scope or "USER",
                event_time=context.event_time,
            )
        )
    return Extraction(operations=operations, extractor="deterministic")
