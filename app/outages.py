"""Which data store an error says is unreachable, if any: the one rule that tells a store
outage (a 503 the client may retry) from a fault of the request or the code (a 500).

Connection-level failures only: a refused or dropped connection, a server shutting down or out
of connection slots, a pool that found no connection in time. A query error (a constraint, a
syntax error, a serialization failure) is not an outage.
"""

from __future__ import annotations

import socket
import traceback

import asyncpg.exceptions as pg
import opensearchpy.exceptions as os_errors
import sqlalchemy.exc as sa

POSTGRES = "postgres"
OPENSEARCH = "opensearch"

_POSTGRES_CONNECTION_ERRORS = (
    pg.PostgresConnectionError,  # SQLSTATE class 08, and a connection that no longer exists
    pg.CannotConnectNowError,  # starting up or shutting down
    pg.AdminShutdownError,
    pg.CrashShutdownError,
    pg.TooManyConnectionsError,
    sa.InterfaceError,  # the driver lost its connection
    sa.TimeoutError,  # the pool found no connection in time
)
# Raw socket errors carry no store: the frames they were raised through name it.
_SOCKET_ERRORS = (ConnectionError, TimeoutError, socket.gaierror)
_DRIVER_MODULES = {"asyncpg": POSTGRES, "sqlalchemy": POSTGRES, "opensearchpy": OPENSEARCH}


def causes(exc: BaseException) -> list[BaseException]:
    """`exc` and the errors it was raised from or during, outermost first."""
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in chain:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def _raised_through_driver(exc: BaseException) -> str | None:
    for frame, _ in traceback.walk_tb(exc.__traceback__):
        package = frame.f_globals.get("__name__", "").split(".", 1)[0]
        if package in _DRIVER_MODULES:
            return _DRIVER_MODULES[package]
    return None


def unavailable_store(exc: BaseException) -> str | None:
    """`postgres` or `opensearch` when `exc` (or an error it wraps) is a connection-level
    failure of that store; None for anything else."""
    for error in causes(exc):
        if isinstance(error, os_errors.ConnectionError):  # ConnectionTimeout included
            return OPENSEARCH
        if isinstance(error, _POSTGRES_CONNECTION_ERRORS):
            return POSTGRES
        if isinstance(error, sa.DBAPIError) and error.connection_invalidated:
            return POSTGRES
        if isinstance(error, _SOCKET_ERRORS) and (store := _raised_through_driver(error)):
            return store
    return None
