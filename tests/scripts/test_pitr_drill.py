"""`make pitr-drill` (scripts/pitr-drill.sh): WAL archived by archive_command, a base backup by
pg_basebackup, a DELETE after the target time, recovery to that time. The drill runs on scratch
clusters of its own, on unix sockets only, and leaves nothing behind."""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.services import ROOT

PG_BIN = Path(f"/usr/lib/postgresql/{os.environ.get('COGNIS_PG_MAJOR', '15')}/bin")
pytestmark = [
    pytest.mark.services,  # it starts two Postgres servers of its own
    pytest.mark.skipif(
        not (PG_BIN / "pg_basebackup").exists(),
        reason="needs PostgreSQL (scripts/install-postgres.sh)",
    ),
]


def test_a_restore_to_a_time_undoes_what_came_after_it() -> None:
    with tempfile.TemporaryDirectory(prefix="cognis-pitr-") as local_dir:
        done = subprocess.run(
            ["bash", str(ROOT / "scripts" / "pitr-drill.sh")],
            env={**os.environ, "COGNIS_LOCAL_DIR": local_dir},
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        assert re.search(
            r"pitr drill passed in \d+ s: recovered to .+, 1500 rows \(1000 from the base "
            r"backup, 500 replayed from the WAL archive\), the DELETE after it undone",
            done.stdout,
        ), done.stdout
        assert list(Path(local_dir).iterdir()) == []  # the scratch clusters are gone
