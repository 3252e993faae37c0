"""What a claim of the ingestion worker (app/ingest/worker.py) needs before its transactions:
its messages, read in one query, and their vectors and those of the other texts their decisions
embed, in one model call; the users whose preparation failed, with why."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

import numpy as np
import structlog
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.db.models import Message
from app.errors import DeadlineExceededError, EmbedderUnavailableError
from app.ingest.pipeline import IngestPipeline
from app.ingest.repository import Claim, IngestRepository
from app.ml.embedder import Embedding

log = structlog.get_logger(__name__)

# Model failures that are about the model service, not the texts sent.
SERVICE_ERRORS = (EmbedderUnavailableError, DeadlineExceededError)


@dataclass(slots=True)
class Prepared:
    """What a claim needs before its transactions: its messages and their vectors (`fresh`:
    those computed now, to be stored), and the users whose preparation failed, with why."""

    messages: dict[uuid.UUID, Message] = field(default_factory=dict)
    embeddings: dict[uuid.UUID, Embedding] = field(default_factory=dict)
    fresh: dict[uuid.UUID, Embedding] = field(default_factory=dict)
    # Per message, the vectors of the other texts its decision embeds.
    prefetched: dict[uuid.UUID, dict[str, Embedding]] = field(default_factory=dict)
    failed: dict[str, Exception] = field(default_factory=dict)


class ClaimPreparation:
    def __init__(
        self, sessionmaker: async_sessionmaker[AsyncSession], pipeline: IngestPipeline
    ) -> None:
        self._sessionmaker = sessionmaker
        self._pipeline = pipeline

    async def prepare(self, claims: list[Claim]) -> Prepared:
        """The claim's messages, read in one query, and their vectors, in one model call
        (step 1 stores none: the submit answers before any model work; rows embedded before,
        by an earlier claim, carry theirs and are reused). If that call fails, each user's
        texts are sent alone, so one user's bad text fails no other user's batch."""
        prepared = Prepared()
        try:
            async with self._sessionmaker() as session:
                prepared.messages = await IngestRepository(session).get_messages(
                    [c.user_id for c in claims], [t.message_id for c in claims for t in c.tasks]
                )
            by_user = [(c.user_id, _messages_of(c, prepared.messages)) for c in claims]
            await self._embed(prepared, claims[0].user_id, [m for _, ms in by_user for m in ms])
        except Exception as exc:
            # The model service away or out of time fails every text alike: no use retrying
            # each user's alone.
            if len(claims) == 1 or not prepared.messages or isinstance(exc, SERVICE_ERRORS):
                prepared.failed = {c.user_id: exc for c in claims}
                return prepared
            log.warning(
                "ingest.group_embedding_failed",
                users=len(claims),
                error=f"{type(exc).__name__}: {exc}",
            )
            for user_id, messages in by_user:
                try:
                    await self._embed(prepared, user_id, messages)
                except Exception as alone:
                    prepared.failed[user_id] = alone
        return prepared

    async def _embed(self, prepared: Prepared, user_id: str, messages: list[Message]) -> None:
        """In one call, as `user_id`'s interactive work (a group's call is charged to its first
        user): the vectors of those of `messages` that have none yet, and of the other texts
        their decisions will embed (IngestPipeline.texts_to_prefetch)."""
        for m in messages:
            if m.embedding_768d is not None and m.embedding_256d is not None:
                prepared.embeddings[m.id] = Embedding(
                    full=np.asarray(m.embedding_768d), coarse=np.asarray(m.embedding_256d)
                )
        missing = [m for m in messages if m.id not in prepared.embeddings]
        wanted = {m.id: self._pipeline.texts_to_prefetch(m.content, m.role) for m in messages}
        others = list(dict.fromkeys(t for texts in wanted.values() for t in texts))
        texts = [m.content for m in missing] + others
        computed = await self._pipeline.embed(texts, user_id) if texts else []
        fresh = dict(zip((m.id for m in missing), computed, strict=False))
        vectors = dict(zip(others, computed[len(missing) :], strict=True))
        prepared.embeddings |= fresh
        prepared.fresh |= fresh
        for message_id, its_texts in wanted.items():
            prepared.prefetched[message_id] = {t: vectors[t] for t in its_texts}


def _messages_of(claim: Claim, messages: dict[uuid.UUID, Message]) -> list[Message]:
    return [messages[t.message_id] for t in claim.tasks if t.message_id in messages]
