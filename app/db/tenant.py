"""The tenant of the work in progress, and the one place that hands it to Postgres.

The API's key check (or a background process, for the rows it handles) sets it for the current
task; every transaction a session begins in that task then starts with
`set_config('cognis.tenant_id', ..., true)`: transaction-local (SET LOCAL), so a pooled
connection never carries it into the next transaction. Row-level security does the rest.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from contextvars import ContextVar

from sqlalchemy import event, text
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session, SessionTransaction

# The tenant that existing rows and the keys of COGNIS_API_KEY_HASHES belong to (migration 0007).
DEFAULT_TENANT_ID = uuid.UUID("00000000-0000-0000-0000-000000000001")
TENANT_SETTING = "cognis.tenant_id"

_current: ContextVar[uuid.UUID | None] = ContextVar("cognis_tenant", default=None)
_SET_TENANT = text(f"SELECT set_config('{TENANT_SETTING}', :tenant, true)")


def current_tenant() -> uuid.UUID | None:
    return _current.get()


def act_as(tenant_id: uuid.UUID | None) -> None:
    """Bind the rest of this task (a request) to `tenant_id` (None: to no tenant)."""
    _current.set(tenant_id)


@contextlib.contextmanager
def tenant_scope(tenant_id: uuid.UUID | None) -> Iterator[None]:
    """Bind what runs inside to `tenant_id` (background work on one tenant's rows; None: to no
    tenant, for work across tenants called from a task that serves one)."""
    token = _current.set(tenant_id)
    try:
        yield
    finally:
        _current.reset(token)


@event.listens_for(Session, "after_begin")
def _set_transaction_tenant(
    session: Session, transaction: SessionTransaction, connection: Connection
) -> None:
    tenant_id = _current.get()
    if tenant_id is not None:
        connection.execute(_SET_TENANT, {"tenant": str(tenant_id)})
