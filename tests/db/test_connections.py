"""Connections: each names its process and pool (`application_name`), and the service's logins
carry server-side timeouts, the same in scripts/service-roles.sql as in app/db/roles.py."""

from __future__ import annotations

import re

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.roles import LOGIN_SETTINGS
from tests.conftest import ROOT, ApiProcess, InProcessApi, ServiceProcess

SETTINGS = (
    "SELECT current_setting('application_name'), current_setting('statement_timeout'), "
    "current_setting('idle_in_transaction_session_timeout')"
)


async def test_each_pool_names_its_process_and_has_its_roles_bounds(
    inprocess_api: InProcessApi,
) -> None:
    runtime = inprocess_api.app.state.runtime
    seen = {}
    for kind, sessionmaker in (
        ("requests", runtime.sessionmaker),
        ("background", runtime.background_sessionmaker),
    ):
        async with sessionmaker() as session:
            seen[kind] = tuple((await session.execute(text(SETTINGS))).one())
    assert seen["requests"][0] == "cognis-api"
    assert seen["background"][0] == "cognis-api-background"
    for kind, settings in LOGIN_SETTINGS.items():
        assert seen[kind][1:] == tuple(value for _, value in settings), kind


async def test_pg_stat_activity_tells_the_processes_apart(
    owner: AsyncEngine, api: ApiProcess, relay: ServiceProcess
) -> None:
    """The API and relay processes of the session, seen by a DBA."""
    async with owner.connect() as connection:
        names = set(
            (
                await connection.execute(
                    text(
                        "SELECT application_name FROM pg_stat_activity "
                        "WHERE datname = current_database()"
                    )
                )
            ).scalars()
        )
    assert {"cognis-api", "cognis-relay-background"} <= names, names


def test_service_roles_sql_sets_the_same_bounds() -> None:
    script = (ROOT / "scripts" / "service-roles.sql").read_text()
    for kind, login in (("requests", "app"), ("background", "worker")):
        for name, value in LOGIN_SETTINGS[kind]:
            line = f"ALTER ROLE :\"{login}\" SET {name} = '{value}';"
            assert line in script, line
    # ...and the deployment guide shows the same, for logins made elsewhere.
    guide = (ROOT / "docs" / "deployment.md").read_text()
    for kind, login in (("requests", "cognis_app"), ("background", "cognis_worker")):
        for name, value in LOGIN_SETTINGS[kind]:
            assert re.search(rf"ALTER ROLE {login} SET {name} = '{value}';", guide), (login, name)
