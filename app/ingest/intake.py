"""Step 1: immediate save. The message row and its task are written in the request's
transaction and committed before any model work: the submit answers as soon as they are
durable, and the worker embeds the message when it claims the task (step 2). An idempotency key
already seen for the user returns the stored message instead of a second one."""

from __future__ import annotations

import uuid
from datetime import timedelta

from app import tracing
from app.config import ApiSettings, IngestSettings
from app.errors import InvalidInputError
from app.ingest.backlog import check_backlog
from app.ingest.domain import ROLES, IncomingMessage, SavedMessage
from app.ingest.repository import IngestRepository
from app.memories.domain import check_content, check_metadata
from app.memories.fields import check_instant, check_text, check_user_id
from app.memories.user_lock import hold_for_write
from app.ml.scheduling.work import Work
from app.vocabulary import MAX_IDEMPOTENCY_KEY_CHARS


def check_messages(
    messages: list[IncomingMessage], api: ApiSettings, ingest: IngestSettings
) -> None:
    """Normalise and validate; InvalidInputError names the offending field."""
    if not messages:
        raise InvalidInputError("give at least one message", field="messages")
    if len(messages) > ingest.ingest_max_messages:
        raise InvalidInputError(
            f"{len(messages)} messages in one request; at most "
            f"{ingest.ingest_max_messages} are allowed",
            field="messages",
        )
    for i, message in enumerate(messages):
        where = f"messages[{i}]."
        message.content = check_content(message.content, api.max_content_chars, f"{where}content")
        if message.role not in ROLES:
            raise InvalidInputError(f"role must be one of {ROLES}", field=f"{where}role")
        if message.scope == "CONTEXT" and not message.session_id:
            raise InvalidInputError(
                "CONTEXT memories belong to one session: give the message's session_id",
                field=f"{where}session_id",
            )
        if (
            message.idempotency_key is not None
            and len(message.idempotency_key) > MAX_IDEMPOTENCY_KEY_CHARS
        ):
            raise InvalidInputError(
                f"idempotency_key is longer than {MAX_IDEMPOTENCY_KEY_CHARS} characters",
                field=f"{where}idempotency_key",
            )
        check_metadata(message.metadata, api.max_metadata_bytes, f"{where}metadata")
        for name in ("speaker", "session_id", "agent_id", "run_id", "idempotency_key"):
            check_text(getattr(message, name), f"{where}{name}")
        # A timestamp the worker could not resolve dates against is refused here, not retried
        # there. Kept in the sender's offset: step 2 resolves "yesterday" there (Postgres stores
        # the instant in UTC, the offset beside it).
        sent_at = check_instant(message.sent_at, f"{where}timestamp")
        assert sent_at is not None  # a message always has its time (default: received)
        message.sent_at = sent_at


async def save_messages(
    repository: IngestRepository,
    api: ApiSettings,
    ingest: IngestSettings,
    user_id: str,
    messages: list[IncomingMessage],
    work: Work,
) -> tuple[uuid.UUID, list[SavedMessage]]:
    """Store the messages and queue one task each; flushes, never commits; no model call (the
    worker embeds). DeadlineExceeded (nothing written) when `work`'s deadline passes first,
    e.g. while the user's write lock is held by an erase."""
    check_user_id(user_id)
    check_messages(messages, api, ingest)
    if ingest.ingest_max_wait_s > 0:  # 0: no bound, and no read of the backlog
        check_backlog(await repository.backlog(ingest.ingest_queue), ingest.ingest_max_wait_s)
    await hold_for_write(repository.session, user_id)
    job_id = uuid.uuid4()
    settle = timedelta(milliseconds=ingest.ingest_settle_ms)
    saved: list[SavedMessage] = []
    for message in messages:
        message_id = await repository.insert_message(user_id, message)
        if message_id is None:
            assert message.idempotency_key is not None
            existing = await repository.message_by_key(user_id, message.idempotency_key)
            if existing is None:  # taken by a concurrent request that has not committed
                raise InvalidInputError(
                    "a message with this idempotency_key is being submitted right now; retry",
                    field="idempotency_key",
                )
            saved.append(SavedMessage(existing[0], existing[1], duplicate=True))
            continue
        repository.add_task(
            user_id,
            message_id,
            job_id,
            message,
            ingest.ingest_queue,
            settle,
            # The worker's spans for this message continue the submitting request's trace.
            traceparent=tracing.traceparent(),
        )
        await repository.session.flush()
        saved.append(SavedMessage(message_id, job_id, duplicate=False))
    if all(s.duplicate for s in saved):
        job_id = saved[0].job_id
    work.check_deadline()  # the caller's transaction then rolls back: nothing committed late
    return job_id, saved
