"""The README's Python and LangGraph examples, run as written against the real API: only its
URL, key and user names are swapped for the test's (the TypeScript one is run by
test_typescript_client.py, the MCP configuration by the MCP tests' cognis-mcp process)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.conftest import API_KEY, ApiProcess

ROOT = Path(__file__).resolve().parents[2]


def python_blocks() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Clients") :]
    section = section[: section.index("\n## ", 1)]
    return re.findall(r"```python\n(.*?)```", section, re.S)


def run_as_written(code: str, api: ApiProcess, users: dict[str, str]) -> str:
    code = code.replace("http://127.0.0.1:8000", api.url).replace("cognis-dev-key", API_KEY)
    for name, user in users.items():
        code = code.replace(f'"{name}"', f'"{user}"')
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'clients' / 'python'}"},
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_the_readme_has_the_python_and_langgraph_examples() -> None:
    blocks = python_blocks()
    assert any("CognisClient(" in block for block in blocks)
    assert any("CognisStore(" in block for block in blocks)


@pytest.mark.parametrize("client", ["CognisClient(", "CognisStore("])
def test_a_readme_example_runs_as_written(api: ApiProcess, client: str) -> None:
    (code,) = [block for block in python_blocks() if client in block]
    alice, bob = f"alice-{uuid.uuid4().hex[:8]}", f"bob-{uuid.uuid4().hex[:8]}"
    printed = run_as_written(code, api, {"alice": alice, "bob": bob})
    if client == "CognisClient(":
        # The history it prints, and the 404 for another user's memory.
        assert "['I live in Tokyo', 'I moved to Osaka']" in printed
        assert f"{bob}" in printed or "not found" in printed.lower()
    else:  # the graph recalls in its second run what its first stored
        assert "['I am allergic to peanuts']" in printed
