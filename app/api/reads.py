"""Reads through the API: each runs where `ReadRouter` sends it (the read replica or the
writer), and a response that read says where, when a replica is configured."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from litestar import Request
from litestar.datastructures import ResponseHeader
from litestar.types import Message, Scope
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.db.reads import ReadRoute, ReadRouter
from app.runtime import Runtime

T = TypeVar("T")
READ_FROM_HEADER = "X-Read-From"
REPLICA_WAIT_HEADER = "X-Replica-Wait-Ms"
READ_FALLBACK_HEADER = "X-Read-Fallback"
# In the request's scope state: headers for the response, added as it starts.
_RESPONSE_HEADERS = "cognis_response_headers"

READ_HEADERS = [
    ResponseHeader(
        name=READ_FROM_HEADER,
        documentation_only=True,
        required=False,
        description="Only with a read replica (COGNIS_READ_DATABASE_URL): `replica` or "
        "`writer`, the database this read ran on.",
    ),
    ResponseHeader(
        name=REPLICA_WAIT_HEADER,
        documentation_only=True,
        required=False,
        description="Only with a read replica: milliseconds this read waited for the replica "
        "to replay the writes committed before it.",
    ),
    ResponseHeader(
        name=READ_FALLBACK_HEADER,
        documentation_only=True,
        required=False,
        description="Only when the writer served a read meant for the replica, why: "
        "`replica_behind` (it had not replayed this read's writes within "
        "COGNIS_REPLICA_WAIT_MAX_MS), `replica_unavailable` (it did not answer), "
        "`replica_position_unknown` (it reports no replay position).",
    ),
]


def add_response_headers(scope: Scope, headers: dict[str, str]) -> None:
    scope["state"].setdefault(_RESPONSE_HEADERS, {}).update(headers)


def with_added_headers(message: Message, scope: Scope) -> None:
    """Add the headers `add_response_headers` kept for this response, as it starts."""
    headers: dict[str, str] | None = scope["state"].pop(_RESPONSE_HEADERS, None)
    if message["type"] == "http.response.start" and headers:
        message["headers"] = [
            *message["headers"],
            *((name.encode("latin-1"), value.encode("latin-1")) for name, value in headers.items()),
        ]


class Reads:
    """This request's reads: `await reads(work, fresh=...)` runs `work` with a session of
    the database the router picks and reports the route in the response's headers. `fresh`:
    the read must see every write committed before it (read-your-writes). (A plain class: the
    framework checks a dataclass dependency field by field, and a scope is no such value.)"""

    def __init__(self, router: ReadRouter, scope: Scope) -> None:
        self.router = router
        self.scope = scope

    async def __call__(self, work: Callable[[AsyncSession], Awaitable[T]], *, fresh: bool) -> T:
        return (await self.routed(work, fresh=fresh))[0]

    async def routed(
        self, work: Callable[[AsyncSession], Awaitable[T]], *, fresh: bool
    ) -> tuple[T, ReadRoute]:
        """As a call, and where it ran: whether that database may miss earlier writes."""
        result, route = await self.router.read(work, fresh=fresh)
        self.report(route)
        return result, route

    async def sessionmaker_for(self, *, fresh: bool) -> async_sessionmaker[AsyncSession]:
        """For a streamed read, which opens its sessions after the response has started."""
        sessionmaker, route = await self.router.sessionmaker_for(fresh=fresh)
        self.report(route)
        return sessionmaker

    def report(self, route: ReadRoute) -> None:
        """Say in the response's headers where a read ran (with a replica configured)."""
        if not self.router.has_replica:
            return
        headers = {READ_FROM_HEADER: route.source, REPLICA_WAIT_HEADER: f"{route.waited_ms:.1f}"}
        if route.fallback is not None:
            headers[READ_FALLBACK_HEADER] = route.fallback
        add_response_headers(self.scope, headers)


async def provide_reads(request: Request[Any, Any, Any], runtime: Runtime) -> Reads:
    return Reads(runtime.reads, request.scope)
