"""Read-your-writes options of the API: the bounded wait for the BM25 index.

Searches ask with `"consistency": "indexed"` in the body; writes with `?wait_for=indexed`.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Annotated, Literal

from litestar.datastructures import ResponseHeader
from litestar.params import Parameter
from sqlalchemy.ext.asyncio import AsyncSession

from app.config import Settings
from app.db.models import Memory
from app.errors import InvalidInputError
from app.runtime import Runtime
from app.search_index.freshness import wait_until_indexed

INDEX_STATE_HEADER = "X-Index-State"
INDEX_WAIT_HEADER = "X-Index-Wait-Ms"

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


def wait_bound_s(settings: Settings, requested_ms: int | None) -> float:
    """The wait's bound in seconds: the request's, never above COGNIS_INDEX_WAIT_MAX_MS."""
    bound = settings.index_wait_max_ms
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
    session: AsyncSession
    runtime: Runtime

    async def headers(self, user_id: str, memories: Iterable[Memory]) -> dict[str, str]:
        """Wait if asked (after committing); the response headers that report the outcome."""
        if not self.requested:
            return {}
        # The framework commits after the handler returns, but the relay can only deliver
        # committed events: commit now (the framework's commit then has nothing left to do).
        await self.session.commit()
        ids = {m.id for m in memories} | {m.replaces_id for m in memories if m.replaces_id}
        return await self.headers_for(user_id, sorted(ids))

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


async def provide_write_wait(
    db_session: AsyncSession,
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
        timeout_s=wait_bound_s(runtime.settings, wait_timeout_ms),
        session=db_session,
        runtime=runtime,
    )
