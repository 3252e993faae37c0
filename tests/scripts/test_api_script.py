"""scripts/api.sh status: a pid file counts only while it names this clone's live API."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.conftest import ApiProcess
from tests.services import ROOT


def _status(local_dir: Path, pid: int) -> subprocess.CompletedProcess:
    (local_dir / "run").mkdir(parents=True, exist_ok=True)
    (local_dir / "run" / "api.pid").write_text(f"{pid}\n")
    env = {**os.environ, "COGNIS_LOCAL_DIR": str(local_dir)}
    return subprocess.run(
        ["bash", str(ROOT / "scripts" / "api.sh"), "status"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


def test_status_is_up_for_our_live_api(tmp_path: Path, api: ApiProcess) -> None:
    result = _status(tmp_path, api.process.pid)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"pid {api.process.pid}" in result.stdout


def test_status_is_down_for_someone_elses_live_process(tmp_path: Path) -> None:
    """A pid reused by another program after the API died."""
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        result = _status(tmp_path, other.pid)
    finally:
        other.kill()
        other.wait()
    assert result.returncode == 1, result.stdout
    assert "down" in result.stdout
    assert not (tmp_path / "run" / "api.pid").exists()  # the stale file is cleared


def test_status_is_down_for_a_killed_api_not_yet_reaped(tmp_path: Path) -> None:
    """kill -9 leaves a zombie until its parent reaps it; `kill -0` still succeeds on it."""
    zombie = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    os.kill(zombie.pid, signal.SIGKILL)
    try:
        while True:  # wait until it is a zombie, without reaping it
            state = Path(f"/proc/{zombie.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            if state == "Z":
                break
        result = _status(tmp_path, zombie.pid)
    finally:
        zombie.wait()
    assert result.returncode == 1, result.stdout
    assert "down" in result.stdout
