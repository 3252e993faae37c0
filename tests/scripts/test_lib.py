"""scripts/lib.sh helpers, run by bash as the scripts run them."""

from __future__ import annotations

import stat
import subprocess
from pathlib import Path

from tests.services import ROOT


def _private_log(path: Path) -> None:
    subprocess.run(
        ["bash", "-c", f'. "{ROOT}/scripts/lib.sh" && private_log "$1"', "_", str(path)],
        check=True,
    )


def test_private_log_creates_and_tightens_owner_only_files(tmp_path: Path) -> None:
    fresh = tmp_path / "fresh.log"
    loose = tmp_path / "loose.log"
    loose.write_text("earlier lines\n")
    loose.chmod(0o644)
    _private_log(fresh)
    _private_log(loose)
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o600
    assert stat.S_IMODE(loose.stat().st_mode) == 0o600
    assert loose.read_text() == "earlier lines\n"  # kept, only the mode changed
