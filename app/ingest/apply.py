"""Step 4: write one message's operations through the versioned store, in the caller's
transaction, with an audit row per decision. UPDATE supersedes, DELETE ends; nothing is removed."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

import msgspec

from app.db.models import IngestDecision
from app.ingest.domain import Extraction, MessageContext, Operation
from app.memories.context import turn_line
from app.memories.domain import MemoryDraft, MemoryUpdate, SaidIn
from app.memories.sentences import sentence_texts
from app.memories.service import MemoryService
from app.ml.embedder import Embedding


def sentence_vectors_known(
    content: str, speaker: str | None, prefetched: Mapping[str, Embedding]
) -> list[Any] | None:
    """A new memory's sentence vectors where the decision already embedded every text they
    are made of (its sentences, prefetched for the supersedes model: the same texts when the
    memory says what the message said and names no speaker), so the background does not embed
    them again; [] for a memory of one sentence, as the background stores; None otherwise
    (the background embeds them, app/memories/sentence_backfill.py)."""
    texts = sentence_texts(content, speaker)
    if not all(text in prefetched for text in texts):
        return None
    return [prefetched[text].full for text in texts]


async def apply_operation(
    service: MemoryService,
    context: MessageContext,
    op: Operation,
    embedding: Embedding | None = None,
    turn: Embedding | None = None,
) -> None:
    """Apply one operation; sets op.memory_id to the version it wrote (ADD, UPDATE).
    `embedding` is that of op.content, computed earlier, so the store does not embed again;
    `turn` that of the message, the context vector of a fact said as part of it (op.turn)."""
    context_text = turn_line(op.turn, context.speaker) if op.turn else None
    context_vector = turn.full if op.turn and turn is not None else None
    if op.op == "ADD":
        assert op.content is not None
        (memory,) = await service.create(
            context.user_id,
            [
                MemoryDraft(
                    content=op.content,
                    category=op.category,
                    scope=op.scope,
                    session_id=context.session_id if op.scope == "CONTEXT" else None,
                    agent_id=context.agent_id,
                    run_id=context.run_id,
                    speaker=context.speaker,
                    event_time=op.event_time,
                    said_at=context.sent_at,
                    metadata=dict(context.metadata),
                    source_message_id=context.message_id,
                    embedding=embedding,
                    context=context_text,
                    context_embedding=context_vector,
                    sentence_embeddings=sentence_vectors_known(
                        op.content, context.speaker, context.prefetched
                    ),
                )
            ],
        )
        op.memory_id, op.category = memory.id, memory.category
    elif op.op == "UPDATE":
        assert op.target is not None and op.content is not None
        metadata: dict[str, Any] | msgspec.UnsetType = msgspec.UNSET  # the memory's own
        if context.metadata:
            metadata = {**op.target.metadata, **context.metadata}
        memory = await service.update(
            context.user_id,
            op.target.memory_id,
            MemoryUpdate(
                content=op.content,
                # No category given: the memory keeps its own (never a silent change); a
                # given one was checked by the guard, and is again by the store.
                category=msgspec.UNSET if op.category is None else op.category,
                speaker=context.speaker,
                event_time=op.event_time,
                metadata=metadata,
            ),
            embedding,
            # Only the version decided on: another writer's since is a conflict, and the
            # message is decided again on what is current (app/ingest/worker.py).
            expected_versions=frozenset({op.target.memory_id}),
            said_in=SaidIn(context.message_id, context.sent_at, context_text, context_vector),
        )
        op.memory_id, op.category = memory.id, memory.category
    elif op.op == "DELETE":
        assert op.target is not None
        await service.delete(
            context.user_id,
            op.target.memory_id,
            expected_versions=frozenset({op.target.memory_id}),
        )


def audit_rows(
    job_id: uuid.UUID, context: MessageContext, extraction: Extraction
) -> list[IngestDecision]:
    """One row per decision (an answer with no operations is recorded as one NONE)."""
    assert context.message_id is not None
    operations = extraction.operations or [Operation(op="NONE", reason="no facts to keep")]
    return [
        IngestDecision(
            job_id=job_id,
            message_id=context.message_id,
            user_id=context.user_id,
            position=position,
            operation=op.op,
            target_memory_id=op.target.memory_id if op.target else None,
            memory_id=op.memory_id,
            content=op.content,
            category=op.category,
            reason=op.reason,
            event_time=op.event_time if op.op in ("ADD", "UPDATE") else None,
            extractor=extraction.extractor,
            model=extraction.model,
            raw_answer_sha256=extraction.raw_answer_sha256,
            latency_ms=extraction.latency_ms,
            fallback_used=extraction.fallback_used,
            failure=extraction.failure,
            prompt_version=extraction.prompt_version,
            llm_gate=extraction.llm_gate,
            gate_similarity=extraction.gate_similarity,
        )
        for position, op in enumerate(operations)
    ]
