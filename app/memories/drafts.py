"""A memory's draft on its way to the store: embedded (and categorised) before any transaction
opens, then turned into the row of a new version. The service (app/memories/service.py), the
batch job worker, the ingestion pipeline and imports share these steps."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import Memory
from app.db.tenant import current_tenant
from app.errors import TooMuchWorkError
from app.memories.categories import choose_categories
from app.memories.context import contextual_text
from app.memories.domain import MemoryDraft
from app.memories.sentences import sentence_texts
from app.ml.categories import CategoryClassifier
from app.ml.embedder import Embedder
from app.ml.language import detect_language
from app.ml.scheduling.work import Work, WorkClass


def interactive_write(user_id: str) -> Work:
    """A single write of this user, in the tenant of the work in progress."""
    return Work(WorkClass.INTERACTIVE, current_tenant(), user_id)


async def embed_drafts(
    drafts: list[MemoryDraft], embedder: Embedder, work: Work, sentences: int = 0
) -> None:
    """Embed the drafts that have no embedding yet, the contextual text of those with a
    context (app/memories/context.py) and, when the drafts have at most `sentences` sentence
    texts in all, their sentences (app/memories/sentences.py), in one call. Past that (and by
    default: 0) their sentences are embedded later, in the background
    (app/memories/sentence_backfill.py)."""
    missing = [d for d in drafts if d.embedding is None]
    with_context = [
        (d, text)
        for d in drafts
        if d.context_embedding is None and (text := contextual_text(d)) is not None
    ]
    with_sentences = [
        (d, sentence_texts(d.content, d.speaker))
        for d in drafts
        if sentences and d.sentence_embeddings is None
    ]
    if sum(len(texts) for _, texts in with_sentences) > sentences:
        with_sentences = []
    texts = [d.content for d in missing] + [text for _, text in with_context]
    texts += [text for _, sentence_texts_ in with_sentences for text in sentence_texts_]
    try:
        # Nothing to embed (a decision computed every vector): no call, so a write that holds
        # its transaction never waits on the model queue for nothing.
        embeddings = await embedder.embed(texts, work) if texts else []
    except TooMuchWorkError as exc:
        # The model counts texts (a memory is one or more); the client sent memories, and can
        # only act on a number of those.
        if work.deadline is None:
            raise
        raise work.deadline.too_much(
            exc.extra["needed_ms"] / 1000, len(drafts), "memories"
        ) from exc
    made = iter(embeddings)
    for draft in missing:
        draft.embedding = next(made)
    for draft, _ in with_context:
        draft.context_embedding = next(made).full
    for draft, sentence_texts_ in with_sentences:
        # A memory of one sentence gets [], as the background stores: its content's vector.
        draft.sentence_embeddings = [next(made).full for _ in sentence_texts_]
    if embedder.multilingual is not None:
        without = [d for d in drafts if d.embedding_ml is None]
        vectors = await embedder.multilingual.encode([d.content for d in without])
        for draft, vector in zip(without, vectors, strict=True):
            draft.embedding_ml = vector


async def complete_drafts(
    session: AsyncSession,
    drafts: list[MemoryDraft],
    embedder: Embedder,
    classifier: CategoryClassifier,
    work: Work,
    sentences: int = 0,
) -> None:
    """Every draft embedded (with its sentences, within `sentences`: embed_drafts), and
    categorised by its embedding where no category was given (POST /memories and imports
    alike)."""
    await embed_drafts(drafts, embedder, work, sentences)
    await choose_categories(session, classifier, drafts)


def new_version(
    user_id: str,
    draft: MemoryDraft,
    now: datetime | None,
    replaces: Memory | None = None,
    memory_id: uuid.UUID | None = None,
) -> Memory:
    """The row of a new version: version 1 of a new chain, or the successor of `replaces`.
    `now` is the transaction's time (None: the bulk writer sets it when it inserts)."""
    assert draft.embedding is not None
    memory_id = memory_id or uuid.uuid4()
    return Memory(
        id=memory_id,
        user_id=user_id,
        chain_id=replaces.chain_id if replaces else memory_id,
        version=replaces.version + 1 if replaces else 1,
        content=draft.content,
        category=draft.category,
        scope=draft.scope,
        session_id=draft.session_id,
        agent_id=draft.agent_id,
        run_id=draft.run_id,
        is_current=True,
        replaces_id=replaces.id if replaces else None,
        speaker=draft.speaker,
        event_time=draft.event_time,
        event_end=draft.event_end,
        created_at=now,
        embedding_768d=draft.embedding.full,
        embedding_256d=draft.embedding.coarse,
        metadata_=draft.metadata,
        source_message_id=draft.source_message_id,
        context=draft.context,
        context_embedding_768d=draft.context_embedding,
        sentence_embeddings_768d=draft.sentence_embeddings,
        embedding_ml=draft.embedding_ml,
        follows_chain_id=draft.follows_chain_id,
        mentioned_at=draft.mentioned_at,
        expires_at=draft.expires_at,
        language=draft.language or detect_language(draft.content),
    )
