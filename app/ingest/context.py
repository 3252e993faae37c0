"""Step 2: speaker and time. Who said it, and what its relative dates mean at the *message* time."""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Protocol

from app.ingest.domain import MessageContext
from app.ml.embedder import Embedding
from app.time_expressions import in_offset, resolve_time_expressions

# "Caroline: I went to a support group" — transcripts often carry the speaker inline.
_INLINE_SPEAKER = re.compile(r"^\s*(?P<name>[A-Z][\w.'-]{0,30}(?: [A-Z][\w.'-]{0,30})?):\s+\S")


def identify_speaker(speaker: str | None, content: str) -> str | None:
    """The given speaker, else a "Name: ..." prefix of the text, else unknown."""
    if speaker and speaker.strip():
        return speaker.strip()
    match = _INLINE_SPEAKER.match(content)
    return match.group("name") if match else None


class SaidMessage(Protocol):
    """What step 2 reads of a message: a submitted one or a stored row alike."""

    content: str
    role: str
    speaker: str | None
    session_id: str | None
    agent_id: str | None
    run_id: str | None
    sent_at: datetime

    @property
    def utc_offset_minutes(self) -> int | None: ...


def sender_time(message: SaidMessage) -> datetime:
    """When the message was sent, on the sender's clock: a stored row comes back from Postgres
    in UTC and carries the sender's offset beside it; a submitted one still has its own."""
    return in_offset(message.sent_at, message.utc_offset_minutes)


def message_context(
    user_id: str,
    message_id: uuid.UUID | None,
    message: SaidMessage,
    scope: str | None,
    embedding: Embedding | None = None,
    metadata: Mapping[str, Any] | None = None,
    prefetched: Mapping[str, Embedding] | None = None,
) -> MessageContext:
    sent_at = sender_time(message)
    return MessageContext(
        user_id=user_id,
        message_id=message_id,
        content=message.content,
        role=message.role,
        speaker=identify_speaker(message.speaker, message.content),
        session_id=message.session_id,
        sent_at=sent_at,
        scope=scope,
        windows=resolve_time_expressions(message.content, sent_at),
        embedding=embedding,
        agent_id=message.agent_id,
        run_id=message.run_id,
        metadata=dict(metadata or {}),
        prefetched=prefetched or {},
    )
