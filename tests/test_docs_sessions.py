"""The shell sessions of the docs, run as written against the real API: the ```bash blocks a
page marks `<!-- session -->`, in order, in one bash with `set -euo pipefail` (a variable the
text never sets fails it), each `curl -s` made to fail on an error status. Only the URL, the
key and the user names are swapped for the test's."""

from __future__ import annotations

import re
import subprocess
import uuid
from pathlib import Path

import pytest

from tests.conftest import API_KEY, ApiProcess

DOCS = Path(__file__).resolve().parents[1] / "docs"
BLOCK = re.compile(r"<!-- session -->\n```bash\n(.*?)```", re.S)
SESSIONS = sorted(page.name for page in DOCS.glob("*.md") if BLOCK.search(page.read_text()))


def session(page: Path) -> str:
    return "\n".join(BLOCK.findall(page.read_text()))


def as_test_runs_it(script: str, url: str, users: dict[str, str]) -> str:
    script = script.replace("http://127.0.0.1:8000", url).replace("cognis-dev-key", API_KEY)
    for name, user in users.items():
        script = re.sub(rf"\b{name}\b", user, script)
    return re.sub(r"\bcurl -s\b", "curl -sS --fail-with-body", script)


@pytest.mark.parametrize("name", SESSIONS)
def test_a_pages_session_runs_as_written(api: ApiProcess, name: str) -> None:
    page = DOCS / name
    suffix = uuid.uuid4().hex[:8]
    users = {"alice": f"alice-{suffix}", "bob": f"bob-{suffix}"}
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", as_test_runs_it(session(page), api.url, users)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-3000:])
    # It did what it says, as the user it names.
    assert f'"user_id":"{users["alice"]}"' in done.stdout.replace(" ", "")
    assert "I moved to Osaka" in done.stdout


def test_the_pages_have_sessions() -> None:
    assert {"api.md", "ingestion.md"} <= set(SESSIONS)


def test_the_harness_fails_on_an_unset_variable_and_an_error_status() -> None:
    unset = subprocess.run(["bash", "-euo", "pipefail", "-c", "echo $NEVER_SET"], check=False)
    assert unset.returncode != 0
    script = as_test_runs_it(
        "curl -s http://127.0.0.1:8000/users/alice", "http://h:1", {"alice": "a2"}
    )
    assert script == "curl -sS --fail-with-body http://h:1/users/a2"
    failed = subprocess.run(["bash", "-c", as_test_runs_it("curl -s http://127.0.0.1:1/", "", {})])
    assert failed.returncode != 0
