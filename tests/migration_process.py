"""`alembic upgrade` in a process of its own that starts in milliseconds: a child of a fork
server that imported alembic and the app's models once (multiprocessing's "forkserver").

For tests/test_migration_rerun.py's traces and kills: migrations/env.py's fault injection
(COGNIS_MIGRATION_TRACE, COGNIS_MIGRATION_KILL_AFTER) ends the child with `os._exit(75)`, so
whatever its open transaction had not committed is lost with its connection, as when the
`alembic` command is killed; but each of the dozens of runs no longer pays a Python start and
the app's imports (about 2 s of CPU each on CI's machine).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
from pathlib import Path

from alembic import command
from alembic.config import Config

ROOT = Path(__file__).resolve().parent.parent
_CONTEXT = multiprocessing.get_context("forkserver")
_CONTEXT.set_forkserver_preload(
    [__name__, "app.db.models", "app.tenants.models", "app.db.migration_safety"]
)


def _upgrade(url: str, revision: str, environment: dict[str, str]) -> None:
    os.environ.update(environment)
    config = Config(str(ROOT / "alembic.ini"))
    config.set_main_option("script_location", str(ROOT / "migrations"))
    config.attributes.update(database_url=url, configure_logger=False)
    command.upgrade(config, revision)


async def upgrade_in_child(url: str, revision: str, **environment: str) -> int:
    """`alembic upgrade <revision>` of the database at `url` in a forked child, with these
    variables set there; its exit status (0, 1 on an error, 75 when killed by env.py)."""
    child = _CONTEXT.Process(target=_upgrade, args=(url, revision, environment))
    child.start()
    await asyncio.to_thread(child.join)
    assert child.exitcode is not None
    return child.exitcode
