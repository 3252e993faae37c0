"""The Idempotency-Key header of the write routes: replay a stored response, or record the
response in the write's own transaction (app/idempotency)."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, Any

from litestar import Request, Response
from litestar.datastructures import ResponseHeader
from litestar.enums import MediaType
from litestar.params import Parameter
from litestar.serialization import decode_json, encode_json
from litestar.status_codes import HTTP_202_ACCEPTED
from sqlalchemy.ext.asyncio import AsyncSession

from app.api.consistency import INDEX_STATE_HEADER, WriteWait
from app.api.schemas.memories import BatchJobOut
from app.db.models import BatchJob, Memory
from app.errors import ConflictError
from app.idempotency import store
from app.idempotency.rules import (
    IDEMPOTENCY_KEY_HEADER,
    IdempotencyKeyInUseError,
    IdempotencyKeyReusedError,
    check_key,
    request_hash,
)
from app.idempotency.store import KeyedRequest, StoredRequest
from app.runtime import Runtime
from app.vocabulary import MAX_IDEMPOTENCY_KEY_CHARS

REPLAYED_HEADER = "Idempotency-Replayed"
REPLAY_HEADERS = [
    ResponseHeader(
        name=REPLAYED_HEADER,
        documentation_only=True,
        required=False,
        description="`true`: the stored response of the first request with this "
        "Idempotency-Key; nothing was written again.",
    )
]
# A message submission still `running` after this long (beyond its own wait bounds) lost its
# process: a retry answers from its job instead of waiting for it.
ABANDONED_AFTER_GRACE_S = 30.0


class KeyTakenError(Exception):
    """Raised inside a write's transaction to roll it back: a request with the same key
    committed first."""


@dataclass
class IdempotentWrite:
    """A write route's Idempotency-Key (None: sent without one) and what replaying or
    recording its response needs."""

    user_id: str
    request: KeyedRequest | None
    status_code: int  # the route's success status
    session: AsyncSession  # the request's: a memory write's key commits with the write
    runtime: Runtime
    # Where the jobs of a write that may answer 202 (a batch create) are read: its Location.
    jobs_path: str | None = None

    async def previous(self) -> StoredRequest | None:
        """The first request with this key, if it is the same request (422 otherwise)."""
        assert self.request is not None
        async with self.runtime.sessionmaker() as session:
            stored = await store.find(session, self.request.user_id, self.request.key)
        if stored is not None and stored.request_hash != self.request.request_hash:
            raise IdempotencyKeyReusedError(self.request.key, stored.route)
        return stored

    def replay(self, stored: StoredRequest) -> Response[Any]:
        assert stored.response_status is not None and stored.response_body is not None
        headers = {REPLAYED_HEADER: "true"}
        if stored.response_status == HTTP_202_ACCEPTED:
            headers |= self._job_location(stored.response_body)
        return _json(stored.response_body, stored.response_status, headers)

    def _job_location(self, body: bytes) -> dict[str, str]:
        """A memory write answered 202 (a batch job): where its job is read."""
        if self.jobs_path is None:
            return {}
        job_id = decode_json(body).get("job_id")
        return {"Location": f"{self.jobs_path}/{job_id}"} if job_id else {}

    async def respond(
        self,
        write: Callable[[], Awaitable[list[Memory] | BatchJob]],
        render: Callable[[list[Memory]], Any],
        index_wait: WriteWait,
    ) -> Response[Any]:
        """A memory write: `write` runs at most once per key; its response (`render` of what
        it wrote, or 202 with the job it queued instead) is recorded in its transaction, and
        replayed to every retry."""
        request = self.request
        if request is None:
            written = await write()
            self._wait_for_index(written, index_wait)
            return self._answer(written, render, index_wait)
        stored = await self.previous()
        if stored is not None:
            return self.replay(stored)
        try:
            written = await write()
        except ConflictError:
            # A twin with this key may have committed while this one waited for a row lock
            # (it ended the version this one then found superseded): its response stands.
            await self.session.rollback()
            if (stored := await self.previous()) is not None:
                return self.replay(stored)
            raise
        answer = self._answer(written, render, index_wait)
        taken = not await store.record(
            self.session,
            request,
            self.runtime.settings.api.idempotency_ttl_s,
            response=(answer.status_code or self.status_code, answer.content),
        )
        if taken:  # a twin committed first: this write is rolled back, the twin's answers
            await self.session.rollback()
            if (stored := await self.previous()) is None:
                raise IdempotencyKeyInUseError(request.key, retry_after_s=1)
            return self.replay(stored)
        self._wait_for_index(written, index_wait)
        return answer

    def _wait_for_index(self, written: list[Memory] | BatchJob, index_wait: WriteWait) -> None:
        if not isinstance(written, BatchJob):
            index_wait.after_commit(self.user_id, written)

    def _answer(
        self,
        written: list[Memory] | BatchJob,
        render: Callable[[list[Memory]], Any],
        index_wait: WriteWait,
    ) -> Response[Any]:
        """What a write answers: its memories (the route's status, with the index wait it
        asked for), or 202 with the batch job it queued and its Location."""
        if isinstance(written, BatchJob):
            body = encode_json(BatchJobOut.of(written))
            headers = self._job_location(body)
            if index_wait.requested:  # nothing is written yet, so nothing is indexed
                headers[INDEX_STATE_HEADER] = "pending"
            return _json(body, HTTP_202_ACCEPTED, headers)
        return _json(encode_json(render(written)), self.status_code, {})

    async def claim_job(self, session: AsyncSession, job_id: uuid.UUID) -> None:
        """In a message submission's step-1 transaction: the key, `running` with its job."""
        assert self.request is not None
        ttl_s = self.runtime.settings.api.idempotency_ttl_s
        if not await store.record(session, self.request, ttl_s, job_id=job_id):
            raise KeyTakenError

    def check_abandoned(self, stored: StoredRequest) -> uuid.UUID:
        """The job of a `running` submission whose request is gone; 409 while it may still be
        answering."""
        assert self.request is not None and stored.job_id is not None
        settings = self.runtime.settings
        bound_s = (
            settings.ingest.ingest_wait_timeout_s
            + settings.relay.index_wait_max_ms / 1000
            + ABANDONED_AFTER_GRACE_S
        )
        if stored.age_s < bound_s:
            retry_after_s = max(1, min(5, int(bound_s - stored.age_s)))
            raise IdempotencyKeyInUseError(self.request.key, retry_after_s)
        return stored.job_id

    async def finish(self, response: Response[Any]) -> Response[Any]:
        """A message submission's response, recorded on its `running` row."""
        assert self.request is not None
        body = encode_json(response.content)
        status = response.status_code or self.status_code
        async with self.runtime.sessionmaker() as session, session.begin():
            await store.complete(session, self.request, status, body)
        return _json(body, status, dict(response.headers))


def _json(body: bytes, status: int, headers: dict[str, Any]) -> Response[Any]:
    return Response(body, status_code=status, media_type=MediaType.JSON, headers=headers)


async def provide_idempotent_write(
    request: Request[Any, Any, Any],
    db_session: AsyncSession,
    runtime: Runtime,
    idempotency_key: Annotated[
        str | None,
        Parameter(
            header=IDEMPOTENCY_KEY_HEADER,
            required=False,
            description=f"1-{MAX_IDEMPOTENCY_KEY_CHARS} visible ASCII characters, e.g. a random "
            "UUID, new for each logical write and the same on each retry of it. A retry with "
            "the same key (same user, same request) gets the first response again, with "
            "`Idempotency-Replayed: true`, and writes nothing; the same key with another "
            "request gets 422; while the first request still runs, a retry waits for it or "
            "gets 409 (`code: idempotency_key_in_use`, Retry-After). Kept for "
            "COGNIS_IDEMPOTENCY_TTL_S (a day).",
        ),
    ] = None,
) -> IdempotentWrite:
    user_id = request.path_params["user_id"]
    keyed = None
    if idempotency_key is not None:
        keyed = KeyedRequest(
            user_id=user_id,
            key=check_key(idempotency_key),
            route=f"{request.method} {request.scope.get('path_template', request.url.path)}",
            request_hash=request_hash(
                request.method,
                request.url.path,
                request.query_params.multi_items(),
                await request.body(),
            ),
        )
    return IdempotentWrite(
        user_id=user_id,
        request=keyed,
        status_code=request.route_handler.status_code or 200,
        session=db_session,
        runtime=runtime,
    )
