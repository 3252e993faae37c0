"""Where a run's time goes: each test's setup, call and teardown seconds, summed by the unit
pytest-xdist schedules (a loadgroup, else the test's file), with the worker that ran it.

A plugin of the run's first process (the controller under pytest-xdist, whose reports carry the
worker and the `@group` suffix of `--dist loadgroup`). A run of more than 300 seconds of tests
(COGNIS_TEST_COSTS_AFTER_S) prints the costliest units and each worker's busy time at its end,
and writes every test's figures to `.local/test-costs.json` (docs/development.md, "What a CI
run costs").
"""

from __future__ import annotations

import json
import os
import re
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import pytest

# A short run (one file in the edit loop) prints nothing; COGNIS_TEST_COSTS_AFTER_S=0: any run.
SUMMARY_AFTER_S = float(os.environ.get("COGNIS_TEST_COSTS_AFTER_S", "300"))
SHOWN_UNITS = 20


def unit_of(nodeid: str) -> str:
    """The scheduling unit of a test: its loadgroup (`...::test@group`), else its file."""
    group = re.search(r"@([^\[\]@:]+)$", nodeid)
    return f"@{group[1]}" if group else nodeid.split("::", 1)[0]


@dataclass
class Unit:
    tests: set[str] = field(default_factory=set)
    seconds: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    workers: set[str] = field(default_factory=set)

    @property
    def total(self) -> float:
        return sum(self.seconds.values())


class Costs:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.started = time.monotonic()
        self.tests: dict[str, dict[str, float | str]] = defaultdict(dict)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        node = getattr(report, "node", None)  # the worker, under pytest-xdist
        row = self.tests[report.nodeid]
        row[report.when] = round(report.duration, 3)
        row["worker"] = node.gateway.id if node is not None else "main"

    def units(self) -> dict[str, Unit]:
        units: dict[str, Unit] = defaultdict(Unit)
        for nodeid, row in self.tests.items():
            unit = units[unit_of(nodeid)]
            unit.tests.add(nodeid)
            unit.workers.add(str(row["worker"]))
            for phase in ("setup", "call", "teardown"):
                unit.seconds[phase] += float(row.get(phase, 0.0))
        return units

    def pytest_terminal_summary(self, terminalreporter) -> None:
        busy: dict[str, float] = defaultdict(float)
        for row in self.tests.values():
            busy[str(row["worker"])] += sum(
                float(v) for k, v in row.items() if k in ("setup", "call", "teardown")
            )
        if sum(busy.values()) < SUMMARY_AFTER_S:
            return
        units = sorted(self.units().items(), key=lambda item: -item[1].total)
        wall = time.monotonic() - self.started
        write = terminalreporter.write_line
        terminalreporter.section("where the time went (tests/costs.py)")
        write(f"{'unit':60} {'tests':>5} {'setup':>7} {'call':>7} {'teardown':>8} {'worker':>6}")
        for name, unit in units[:SHOWN_UNITS]:
            s = unit.seconds
            workers = ",".join(sorted(unit.workers))
            write(
                f"{name[:60]:60} {len(unit.tests):5d} {s['setup']:7.0f} {s['call']:7.0f}"
                f" {s['teardown']:8.0f} {workers:>6}"
            )
        rest = units[SHOWN_UNITS:]
        write(f"{len(rest)} more units: {sum(u.total for _, u in rest):.0f} s")
        for worker, seconds in sorted(busy.items()):
            write(f"worker {worker}: {seconds:.0f} s in tests of {wall:.0f} s of run")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps(self.tests, indent=1, sort_keys=True))
        write(f"every test's seconds: {self.path}")
