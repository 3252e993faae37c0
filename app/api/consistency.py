"""Read-your-writes options of the API: the bounded wait for the BM25 index.

Searches ask with `"consistency": "indexed"` in the body; writes with `?wait_for=indexed`.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from functools import partial
from typing import Annotated, Any, Literal

from litestar import Request
from litestar.datastructures import ResponseHeader
from litestar.params import Parameter
from litestar.types import Message, Scope

from app.api.reads import add_response_headers, with_added_headers
from app.config import RelaySettings
from app.db.models import Memory
from app.errors import InvalidInputError
from app.runtime import Runtime
from app.search_index.freshness import wait_until_indexed

INDEX_STATE_HEADER = "X-Index-State"
INDEX_WAIT_HEADER = "X-Index-Wait-Ms"
SendHook = Callable[[Message, Scope], Awaitable[None]]
# In the request's scope state: the wait a write asked for, run after the framework's commit.
_AFTER_COMMIT = "cognis_wait_after_commit"

WRITE_WAIT_HEADERS = [
    ResponseHeader(
        name=INDEX_STATE_HEADER,
        documentation_only=True,
        required=False,
        description="Only with ?wait_for=indexed. `indexed`: this write is in the BM25 index "
        "and searchable. `pending`: the wait ran out first; the write is committed and "
        "reaches the index later.",
    ),
    ResponseHeader(
        name=INDEX_WAIT_HEADER,
        documentation_only=True,
        required=False,
        description="Only with ?wait_for=indexed: milliseconds spent waiting for the index.",
    ),
]


def wait_bound_s(relay: RelaySettings, requested_ms: int | None) -> float:
    """The wait's bound in seconds: the request's, never above COGNIS_INDEX_WAIT_MAX_MS."""
    bound = relay.index_wait_max_ms
    if requested_ms is None:
        return bound / 1000
    if requested_ms > bound:
        raise InvalidInputError(
            f"wait_timeout_ms must be at most {bound}, not {requested_ms}",
            field="wait_timeout_ms",
        )
    return requested_ms / 1000


@dataclass
class WriteWait:
    """A write's optional wait until its own outbox events are delivered (bounded)."""

    requested: bool
    timeout_s: float
    runtime: Runtime
    request: Request[Any, Any, Any]

    def after_commit(self, user_id: str, memories: Iterable[Memory]) -> None:
        """If asked, wait for these memory versions once the framework has committed the
        request (the relay can only deliver committed events): `commit_then_wait` waits and
        adds the headers that report the outcome to the response."""
        if not self.requested:
            return
        ids = {m.id for m in memories} | {m.replaces_id for m in memories if m.replaces_id}
        self.request.scope["state"][_AFTER_COMMIT] = partial(self.headers_for, user_id, sorted(ids))

    async def headers_for(self, user_id: str, memory_ids: list[uuid.UUID]) -> dict[str, str]:
        """Wait for the events of already committed memory versions (ingestion jobs)."""
        if not self.requested:
            return {}
        outcome = await wait_until_indexed(
            self.runtime.sessionmaker,
            self.runtime.relay,
            user_id,
            self.timeout_s,
            memory_ids,
        )
        return {
            INDEX_STATE_HEADER: "indexed" if outcome.indexed else "pending",
            INDEX_WAIT_HEADER: f"{outcome.waited_ms:.1f}",
        }


def commit_then_wait(commit: SendHook) -> SendHook:
    """The session's before-send handler: `commit` (the framework's autocommit) first, then the
    wait a write asked for (`WriteWait.after_commit`), before its response starts; then the
    headers kept for the response (`add_response_headers`: the wait's, where a read ran)."""

    async def handler(message: Message, scope: Scope) -> None:
        await commit(message, scope)
        if message["type"] != "http.response.start":
            return
        wait = scope["state"].pop(_AFTER_COMMIT, None)
        if wait is not None and 200 <= message["status"] < 300:
            add_response_headers(scope, await wait())
        with_added_headers(message, scope)

    return handler


async def provide_write_wait(
    request: Request[Any, Any, Any],
    runtime: Runtime,
    wait_for: Annotated[
        Literal["indexed"] | None,
        Parameter(
            query="wait_for",
            description="`indexed`: respond only once this write is searchable in the BM25 "
            "index, or the wait's bound has passed (see the X-Index-State header).",
        ),
    ] = None,
    wait_timeout_ms: Annotated[
        int | None,
        Parameter(
            query="wait_timeout_ms",
            ge=0,
            description="Bound of that wait; default and maximum: COGNIS_INDEX_WAIT_MAX_MS.",
        ),
    ] = None,
) -> WriteWait:
    return WriteWait(
        requested=wait_for == "indexed",
        timeout_s=wait_bound_s(runtime.settings.relay, wait_timeout_ms),
        runtime=runtime,
        request=request,
    )
