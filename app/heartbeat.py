"""Proof that a background loop still goes round: what a liveness probe of the relay and of the
ingestion worker reads (charts/cognis-memory, `python -m app heartbeat-check`).

Neither process serves HTTP, and a loop can hang without the process dying (an await that
never returns, a lock never released): the process is then alive and useless. Each loop
touches a file of its own, `<COGNIS_HEARTBEAT_DIR>/<loop>`, every time round (after a batch
or an idle poll, whether or not there was work); the check fails when any loop's file is
older than `COGNIS_HEARTBEAT_MAX_AGE_S`, so one hung loop of several restarts the pod. A
file's mtime is the beat: nothing is kept in memory, and the check is another process.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

# The beat of one loop: called each time round.
Beat = Callable[[], None]


def _no_beat() -> None:
    """A loop whose process keeps no heartbeat."""


@dataclass(frozen=True)
class Heartbeats:
    """The heartbeat directory of one process; `None`: the process keeps none."""

    directory: Path | None

    def reset(self) -> None:
        """At the process's start: the files an earlier run left (a restarted container keeps
        its emptyDir, maybe with loops this run will not have) are removed."""
        if self.directory is None:
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        for stale in self.directory.iterdir():
            if stale.is_file():
                stale.unlink(missing_ok=True)

    def loop(self, name: str) -> Beat:
        """The beat of the loop `name`, beaten once now (the loop exists from its start)."""
        if self.directory is None:
            return _no_beat
        path = self.directory / name

        def beat() -> None:
            # Touch: create on the first beat, else only the mtime changes (no write).
            try:
                os.utime(path)
            except FileNotFoundError:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.touch()

        beat()
        return beat


@dataclass(frozen=True)
class HeartbeatState:
    """What the check found: each loop's age in seconds, and those older than allowed."""

    ages_s: dict[str, float]
    stale: list[str]

    @property
    def alive(self) -> bool:
        return bool(self.ages_s) and not self.stale


def read_heartbeats(directory: Path, max_age_s: float, now: float | None = None) -> HeartbeatState:
    """Every loop's age under `directory`; no file at all counts as not alive (the process
    never started a loop, or its directory is not the one the check reads)."""
    now = time.time() if now is None else now
    ages: dict[str, float] = {}
    if directory.is_dir():
        for path in sorted(directory.iterdir()):
            try:
                ages[path.name] = max(0.0, now - path.stat().st_mtime)
            except FileNotFoundError:  # reset by a starting process meanwhile
                continue
    return HeartbeatState(ages, [name for name, age in ages.items() if age > max_age_s])


def check(directory: str | None, max_age_s: float) -> int:
    """The liveness probe's answer: 0 when every loop beat within `max_age_s`, else 1 (and 2
    when the process keeps no heartbeat), each loop's age printed."""
    if not directory:
        print("no heartbeat: COGNIS_HEARTBEAT_DIR is not set")
        return 2
    state = read_heartbeats(Path(directory), max_age_s)
    for name, age in state.ages_s.items():
        print(f"{name}: {age:.1f}s ago{' (stale)' if name in state.stale else ''}")
    if not state.ages_s:
        print(f"no loop has beaten in {directory}")
    return 0 if state.alive else 1
