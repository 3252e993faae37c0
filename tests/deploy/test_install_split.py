"""`make up` installs what the service runs and nothing else; `make test` (and `make test-fast`,
for the virtualenv) installs the test kit first (issue 53: a fresh machine spent 416 of make
up's 778 s compiling helm for the chart's tests). Read from the scripts and the Makefile, the
way make runs them (`make -n`), so nothing is installed here."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "scripts"
# What only the tests use: each must be installed by install-test-tools.sh, never by install.sh.
TEST_KIT = ("chromium", "node_install", "pgbouncer", "install-helm.sh", "install-llm.sh", " jq")


def _steps(script: Path) -> list[str]:
    return [line for line in script.read_text().splitlines() if re.match(r"\s*step ", line)]


def _dry_run(target: str) -> str:
    return subprocess.run(
        ["make", "-n", target], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout


def test_the_service_install_installs_no_test_kit() -> None:
    service = "\n".join(_steps(SCRIPTS / "install.sh"))
    assert "venv_install runtime" in service
    assert not [tool for tool in TEST_KIT if tool in service]
    kit = "\n".join(_steps(SCRIPTS / "install-test-tools.sh"))
    assert [tool for tool in TEST_KIT if tool in kit] == list(TEST_KIT)
    assert "venv_install test" in kit
    # `make up` runs scripts/up.sh, which installs through install.sh alone.
    up = (SCRIPTS / "up.sh").read_text()
    assert "scripts/install.sh" in up and "install-test-tools" not in up


def test_make_test_installs_both_and_test_fast_the_virtualenv() -> None:
    test = _dry_run("test")
    assert test.index("scripts/install.sh") < test.index("scripts/install-test-tools.sh")
    assert test.index("scripts/install-test-tools.sh") < test.index("pytest")
    fast = _dry_run("test-fast")
    assert "scripts/install-test-tools.sh venv" in fast and "scripts/install.sh" not in fast
