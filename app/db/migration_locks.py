"""How a migration waits for its locks without stalling the service (issue 54).

A DDL statement on a hot table (ALTER TABLE memories ...) needs ACCESS EXCLUSIVE. While a long
reader holds the table, that request queues, and every reader and writer that comes after it
queues behind the request: one 20 s report stopped all traffic for as long as the migration
waited. So each statement waits at most a short `lock_timeout` (500 ms by default), and a
migration that gives up is rolled back, waits (backoff) with traffic flowing, and runs again,
until `lock_retry_s` (300 s) have passed: a long reader makes the migration wait, and traffic
stalls for one slice at a time at most.

Statements that build or drop an index CONCURRENTLY, or VALIDATE a constraint, take only
SHARE UPDATE EXCLUSIVE, which no reader or writer waits for; they wait for old snapshots to end
instead, which stalls nobody. They get `concurrent_lock_timeout` (5 min): a short one would
make a long build fail at its last wait and start over, again and again.

A migration killed mid-statement does not leave the statement running on the server:
`client_connection_check_interval` makes the server stop a query whose client is gone (kill
-9), and SIGTERM/SIGINT cancel the running statement first (migrations/env.py).

Every setting is `alembic -x name=value`, else COGNIS_MIGRATION_<NAME>, else the default.
"""

from __future__ import annotations

import os
import random
import time
from dataclasses import dataclass, field

from alembic import context, op

DEFAULT_LOCK_TIMEOUT = "500ms"
DEFAULT_LOCK_RETRY_S = "300"
DEFAULT_CONCURRENT_LOCK_TIMEOUT = "5min"
# 0 is off; HNSW index builds on big tables can take hours, so the default bound is generous.
DEFAULT_STATEMENT_TIMEOUT = "4h"
# How soon the server notices that a migration's client is gone and stops its statement.
CONNECTION_CHECK_INTERVAL = "1s"
# Backoff between tries: doubling from the first, capped, with jitter (so two migrating
# processes, or a migration and a periodic job, do not meet at the same instants).
FIRST_WAIT_S = 0.5
LONGEST_WAIT_S = 10.0

# SQLSTATEs of a statement stopped by the session's bounds (or cancelled by a DBA).
LOCK_NOT_AVAILABLE = "55P03"
QUERY_CANCELED = "57014"


def option(name: str, default: str) -> str:
    """`alembic -x name=value ...`, else COGNIS_MIGRATION_<NAME>, else the default."""
    given = context.get_x_argument(as_dictionary=True).get(name)
    return given or os.environ.get(f"COGNIS_MIGRATION_{name.upper()}", default)


def interval(value: str) -> str:
    # Goes into SQL text (SET takes no bind parameters): digits and a unit only.
    if not value.replace(" ", "").isalnum():
        raise ValueError(f"a timeout is a number with an optional unit (5s, 10min), not {value!r}")
    return value


def lock_timeout() -> str:
    return interval(option("lock_timeout", DEFAULT_LOCK_TIMEOUT))


def session_timeouts(check_connection: bool = False) -> list[str]:
    """SET statements for the migration session (session-wide: they also hold in autocommit
    blocks). `check_connection` (Postgres 14 and later): the server stops a statement whose
    client went away."""
    statement = interval(option("statement_timeout", DEFAULT_STATEMENT_TIMEOUT))
    settings = [
        f"SET lock_timeout = '{lock_timeout()}'",
        f"SET statement_timeout = '{statement}'",
    ]
    if check_connection:
        settings.append(f"SET client_connection_check_interval = '{CONNECTION_CHECK_INTERVAL}'")
    return settings


def execute_concurrently(statement: str) -> None:
    """A statement that blocks no reader or writer while it waits (CREATE/DROP INDEX
    CONCURRENTLY, VALIDATE CONSTRAINT), run in the caller's autocommit block under
    `concurrent_lock_timeout`, then the session's short lock_timeout again. On an error the
    connection is dropped and the next try sets its timeouts afresh."""
    longer = interval(option("concurrent_lock_timeout", DEFAULT_CONCURRENT_LOCK_TIMEOUT))
    op.execute(f"SET lock_timeout = '{longer}'")
    op.execute(statement)
    op.execute(f"SET lock_timeout = '{lock_timeout()}'")


def _bound_of(statement: object) -> tuple[str, str]:
    """The setting that bounded a statement's lock wait, and its value."""
    text = str(statement or "").upper()
    if "CONCURRENTLY" in text or "VALIDATE CONSTRAINT" in text:
        return "concurrent_lock_timeout", option(
            "concurrent_lock_timeout", DEFAULT_CONCURRENT_LOCK_TIMEOUT
        )
    return "lock_timeout", option("lock_timeout", DEFAULT_LOCK_TIMEOUT)


def sqlstate(error: BaseException) -> str | None:
    return getattr(getattr(error, "orig", None), "sqlstate", None)


def _short(statement: object) -> str:
    text = " ".join(str(statement or "").split())
    return text[:97] + "..." if len(text) > 100 else text


@dataclass
class LockRetry:
    """The tries of one `alembic` run: a try stopped by lock_timeout waits and runs again
    until `budget_s` have passed since the first began."""

    budget_s: float
    started: float = field(default_factory=time.monotonic)
    tries: int = 1

    @classmethod
    def configured(cls) -> LockRetry:
        budget = option("lock_retry_s", DEFAULT_LOCK_RETRY_S)
        try:
            return cls(max(0.0, float(budget)))
        except ValueError:
            raise ValueError(f"lock_retry_s is a number of seconds, not {budget!r}") from None

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def next_wait(self, error: BaseException) -> float | None:
        """Seconds to wait before the next try, or None: not a lock timeout, or the budget
        is spent (the caller reports the error)."""
        if sqlstate(error) != LOCK_NOT_AVAILABLE:
            return None
        wait = min(LONGEST_WAIT_S, FIRST_WAIT_S * 2 ** (self.tries - 1))
        wait *= random.uniform(0.75, 1.25)  # jitter
        left = self.budget_s - self.elapsed()
        if left <= 0:
            return None
        self.tries += 1
        return min(wait, left)

    def progress(self, error: BaseException, wait_s: float, version: str | None) -> str:
        """The line printed before each new try."""
        name, bound = _bound_of(getattr(error, "statement", None))
        return (
            f"migration: {name} ({bound}) passed waiting for a lock at "
            f"`{_short(getattr(error, 'statement', None))}` (database at {version or 'base'});"
            f" rolled back, traffic goes on; try {self.tries} in {wait_s:.1f} s "
            f"({self.elapsed():.0f} s of lock_retry_s={self.budget_s:g} spent)"
        )


def stopped_by_timeout(error: BaseException, retry: LockRetry | None = None) -> str | None:
    """The one line a migration stopped by its lock or statement timeout says, instead of a
    traceback (None: another error). Each revision's transactional part rolled back whole and
    each step outside a transaction is safe to repeat, so the answer is always to rerun."""
    statement = _short(getattr(error, "statement", None))
    code = sqlstate(error)
    if code == LOCK_NOT_AVAILABLE:
        name, bound = _bound_of(getattr(error, "statement", None))
        tries = ""
        if retry is not None and retry.tries > 1:
            tries = f" in each of {retry.tries} tries over {retry.elapsed():.0f} s"
        why = (
            f"a migration step waited longer than {name} ({bound}) for a lock another "
            f"session holds{tries}"
        )
        longer = "-x lock_retry_s=<more seconds of tries>"
    elif code == QUERY_CANCELED:
        bound = option("statement_timeout", DEFAULT_STATEMENT_TIMEOUT)
        why = f"a migration step ran longer than statement_timeout ({bound}), or was cancelled"
        longer = "-x statement_timeout=0 (no bound)"
    else:
        return None
    return (
        f"{why}, and stopped at `{statement}`. Nothing is left half-done (its transaction "
        "rolled back; what committed before it stays): rerun the same command once the other "
        f"session is done (pg_stat_activity shows who blocks whom), or allow more with {longer}"
    )
