"""The write-path bench waits for an idle model service before it measures raw (issue 56,
item 5): the wait reads the model service's CPU from its pid file, as `make up` writes it."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.processes import wait_for_quiet


@pytest.fixture
def model_service(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A `.local` whose model service pid file names a process the test starts."""
    (tmp_path / "run").mkdir()
    monkeypatch.setenv("COGNIS_LOCAL_DIR", str(tmp_path))
    yield tmp_path / "run" / "embedder.pid"


def _start(pid_file: Path, code: str) -> subprocess.Popen[bytes]:
    process = subprocess.Popen([sys.executable, "-c", code])
    pid_file.write_text(str(process.pid))
    return process


def test_a_busy_model_service_is_not_quiet_and_the_wait_says_so(model_service) -> None:
    busy = _start(model_service, "while True: pass")
    try:
        found = wait_for_quiet(timeout_s=1, interval_s=1, machine_busy=1.01)
    finally:
        busy.kill()
        busy.wait()
    assert not found.reached and found.model_cores is not None and found.model_cores > 0.3
    assert "NOT quiet" in found.describe()


def test_an_idle_model_service_is_quiet_at_once(model_service) -> None:
    idle = _start(model_service, "import time; time.sleep(60)")
    try:
        found = wait_for_quiet(timeout_s=30, interval_s=1, machine_busy=1.01)
    finally:
        idle.kill()
        idle.wait()
    assert found.reached and found.model_cores is not None and found.model_cores < 0.1
    assert found.waited_s < 30


def test_without_a_model_service_only_the_machine_is_watched(model_service) -> None:
    found = wait_for_quiet(timeout_s=1, interval_s=1, machine_busy=1.01)
    assert found.reached and found.model_cores is None
    assert "no model service running" in found.describe()
