"""The README's curl session and Python example, and docs/clients.md's Python and LangGraph
examples, run as written against the real API: only its URL, key and user names are swapped for
the test's (the TypeScript one is run by test_typescript_client.py, the MCP configuration by
the MCP tests' cognis-mcp process)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.conftest import API_KEY, ApiProcess
from tests.doc_blocks import one_run_by

ROOT = Path(__file__).resolve().parents[2]
README = "README.md"
CLIENTS = "docs/clients.md"


def example(page: str, contains: str) -> str:
    """The one block of `page` marked `<!-- run by ... -->` for this file that holds it."""
    return one_run_by(__file__, page, contains)


def as_written(code: str, api: ApiProcess, users: dict[str, str]) -> str:
    code = code.replace("http://127.0.0.1:8000", api.url).replace("cognis-dev-key", API_KEY)
    for name, user in users.items():
        code = re.sub(rf"\b{name}\b", user, code)
    return code


def run(argv: list[str], api: ApiProcess) -> str:
    done = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'clients' / 'python'}"},
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def fresh_users() -> dict[str, str]:
    return {"alice": f"alice-{uuid.uuid4().hex[:8]}", "bob": f"bob-{uuid.uuid4().hex[:8]}"}


def test_the_readme_stays_one_screen_and_names_its_examples() -> None:
    assert len((ROOT / README).read_text().splitlines()) <= 150
    assert example(README, "curl")
    assert example(README, "CognisClient(")
    assert example(CLIENTS, "CognisStore(")


def test_the_readme_session_in_curl_runs_as_written(api: ApiProcess) -> None:
    """It sets every variable it uses: run by bash with `set -u`, an unset one fails it."""
    users = fresh_users()
    script = as_written(example(README, "curl"), api, users)
    printed = run(["bash", "-euo", "pipefail", "-c", script], api)
    # The id kept from the create still names the memory after its update: its history.
    assert '["I live in Tokyo","I moved to Osaka"]' in printed
    assert printed.splitlines()[-2:] == ['["ADD"]', "I moved to Osaka"]


def test_the_readme_python_example_runs_as_written(api: ApiProcess) -> None:
    users = fresh_users()
    printed = run(
        [sys.executable, "-c", as_written(example(README, "CognisClient("), api, users)],
        api,
    )
    decisions, first_hit, *block = printed.splitlines()
    assert (decisions, first_hit) == ("['ADD']", "I moved to Osaka")
    # The context block states the current fact, and the message's memory.
    assert "I moved to Osaka" in printed and "Finnish" in "\n".join(block), printed


def test_the_readme_mem0_example_runs_as_written(api: ApiProcess, monkeypatch) -> None:
    """mem0's own client (the `mem0ai` package), pointed at this service."""
    monkeypatch.setenv("MEM0_TELEMETRY", "false")
    code = as_written(example(README, "MemoryClient("), api, fresh_users())
    printed = run([sys.executable, "-c", code], api)
    # The id the add returned still names the memory the update changed.
    assert printed.splitlines()[-1] == "I moved to Porto last spring."


@pytest.mark.parametrize("client", ["CognisClient(", "CognisStore("])
def test_a_clients_page_example_runs_as_written(api: ApiProcess, client: str) -> None:
    users = fresh_users()
    code = as_written(example(CLIENTS, client), api, users)
    printed = run([sys.executable, "-c", code], api)
    if client == "CognisClient(":
        # The history it prints, and the 404 for another user's memory.
        assert "['I live in Tokyo', 'I moved to Osaka']" in printed
        assert f"{users['bob']}" in printed or "not found" in printed.lower()
    else:  # the graph recalls in its second run what its first stored
        assert "['I am allergic to peanuts']" in printed
