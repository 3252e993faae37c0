"""The local Postgres logs what a DBA needs (issue 53): lock waits, slow statements, autovacuum,
with pg_stat_statements preloaded. scripts/pg-conf.sh prints the settings services.sh writes;
PostgreSQL's own parser reads them back (`postgres -C`, which starts no server), so a wrong
name or value fails here rather than at the next restart of the cluster."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.services import ROOT

PG_BIN = Path(f"/usr/lib/postgresql/{os.environ.get('COGNIS_PG_MAJOR', '15')}/bin")
# What the log must show, as written, and as PostgreSQL reports each back (milliseconds).
EXPECTED = {
    "log_lock_waits": "on",
    "deadlock_timeout": "1s",
    "log_min_duration_statement": "1s",
    "log_autovacuum_min_duration": "1s",
    "log_line_prefix": "%m [%p] %q%u@%d ",
}
REPORTED = {
    **EXPECTED,
    "deadlock_timeout": "1000",
    "log_min_duration_statement": "1000",
    "log_autovacuum_min_duration": "1000",
    "log_line_prefix": "%m [%p] %q%u@%d",  # its trailing space, as -C prints it, stripped
}


def _conf(run_dir: Path) -> str:
    return subprocess.run(
        ["bash", str(ROOT / "scripts" / "pg-conf.sh"), str(run_dir)],
        env={**os.environ, "COGNIS_PG_PORT": "55999"},
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def _settings(conf: str) -> dict[str, str]:
    pairs = (line.split("=", 1) for line in conf.splitlines() if "=" in line and line[0] != "#")
    return {name.strip(): value.strip().strip("'") for name, value in pairs}


def test_the_settings_log_lock_waits_slow_statements_and_autovacuum(tmp_path: Path) -> None:
    settings = _settings(_conf(tmp_path))
    assert {name: settings.get(name) for name in EXPECTED} == EXPECTED
    assert settings["unix_socket_directories"] == str(tmp_path)


@pytest.mark.skipif(
    not (PG_BIN / "postgres").exists(), reason="needs PostgreSQL (scripts/install-postgres.sh)"
)
def test_postgres_reads_them_back() -> None:
    """Each setting as the server would take it, from a data folder holding only the file (in
    a folder of its own: pytest's tmp_path is closed to the postgres account)."""
    with tempfile.TemporaryDirectory(prefix="cognis-pg-conf-") as folder:
        data = Path(folder) / "data"
        data.mkdir()
        (data / "postgresql.conf").write_text(_conf(Path(folder) / "run"))
        command = [str(PG_BIN / "postgres"), "-D", str(data)]
        if os.geteuid() == 0:  # the server refuses root
            shutil.chown(folder, "postgres")
            shutil.chown(data, "postgres")
            command = ["runuser", "-u", "postgres", "--", *command]
        _read_back(command)


def _read_back(command: list[str]) -> None:
    wanted = dict(REPORTED)
    if (Path(_pkglibdir()) / "pg_stat_statements.so").exists():
        wanted["shared_preload_libraries"] = "pg_stat_statements"
    read = {
        name: subprocess.run(
            [*command, "-C", name], capture_output=True, text=True, check=True
        ).stdout.strip()
        for name in wanted
    }
    assert read == wanted


def _pkglibdir() -> str:
    return subprocess.run(
        [str(PG_BIN / "pg_config"), "--pkglibdir"], capture_output=True, text=True, check=True
    ).stdout.strip()
