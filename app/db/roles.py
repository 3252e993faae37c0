"""Start-up check of the database roles: requests must run under row-level security, and
background work must be allowed to claim rows of every tenant (migration 0007's roles)."""

from __future__ import annotations

import structlog
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from sqlalchemy.ext.asyncio import AsyncEngine

log = structlog.get_logger(__name__)

_ROLE = text(
    """
    SELECT current_user AS name,
           r.rolsuper OR r.rolbypassrls AS bypasses_rls,
           EXISTS (SELECT 1 FROM pg_tables WHERE tablename = 'memories'
                   AND pg_has_role(current_user, tableowner, 'MEMBER')) AS owns_tables,
           CASE WHEN EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'cognis_background')
                THEN pg_has_role(current_user, 'cognis_background', 'USAGE') END AS background
    FROM pg_roles AS r WHERE r.rolname = current_user
    """
)


# Server-side bounds of the service's logins, per kind (ALTER ROLE <login> SET ...): a runaway
# statement, or a transaction a dead client left open, cannot hold its locks and connection for
# ever. scripts/service-roles.sql sets them on the logins `make up` and compose make (the same
# values: tests/db/test_connections.py), docs/deployment.md ("Connections") gives them for
# other deployments. Requests answer within 55 s; an export streams in one transaction, idle
# while its client reads.
LOGIN_SETTINGS: dict[str, tuple[tuple[str, str], ...]] = {
    "requests": (("statement_timeout", "5min"), ("idle_in_transaction_session_timeout", "10min")),
    "background": (
        ("statement_timeout", "30min"),
        ("idle_in_transaction_session_timeout", "10min"),
    ),
}


class DatabaseRoleError(RuntimeError):
    """The configured roles would let a request cross tenants, or starve background work."""


async def _role(engine: AsyncEngine) -> dict[str, object]:
    async with engine.connect() as connection:
        return dict((await connection.execute(_ROLE)).mappings().one())


async def check_database_roles(
    engine: AsyncEngine, background_engine: AsyncEngine, background: bool, requests: bool = True
) -> None:
    """Refuse to serve through a role that bypasses row-level security (a superuser, or
    BYPASSRLS); warn when the request role could lift it (the owner) or sees every tenant while
    none is set (with `requests`: a process that serves them). With `background`, the
    background role must be in cognis_background."""
    try:
        request_role = await _role(engine)
        background_role = (
            await _role(background_engine) if background_engine is not engine else request_role
        )
    except (OSError, OperationalError, InterfaceError, DBAPIError) as exc:
        log.warning("db.role_check_skipped", error=str(exc))
        return
    if request_role["bypasses_rls"]:
        raise DatabaseRoleError(
            f"COGNIS_DATABASE_URL connects as {request_role['name']}, which bypasses row-level "
            "security, so tenants would not be kept apart: connect as a member of cognis_rw "
            "(scripts/services.sh creates cognis_app)"
        )
    if requests and (request_role["owns_tables"] or request_role["background"]):
        log.warning(
            "db.request_role_not_confined",
            role=request_role["name"],
            message="requests run as a role that owns the tables or sees every tenant while "
            "no tenant is set: use a member of cognis_rw only (e.g. cognis_app), and "
            "COGNIS_WORKER_DATABASE_URL for background work",
        )
    if background and not (background_role["bypasses_rls"] or background_role["background"]):
        raise DatabaseRoleError(
            f"background work (relay, ingestion) connects as {background_role['name']}, which "
            "cannot see the work of every tenant: set COGNIS_WORKER_DATABASE_URL to a member of "
            "cognis_background (scripts/services.sh creates cognis_worker), or turn "
            "COGNIS_RELAY_IN_API and COGNIS_INGEST_WORKER_IN_API off"
        )
