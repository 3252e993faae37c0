"""The sessions of the docs, run as written against the real API.

A page's session is its blocks marked `<!-- session -->` (tests/doc_blocks.py), in the page's
order, in one bash with `set -euo pipefail`, so a variable the text never sets fails it: bash
blocks as they are, python blocks through the project's Python (`python - <<'EOF'`). Each `curl
-s` is made to fail on an error status, except one that prints the status itself (`-w
'%{http_code}'`). The session runs in an empty folder (with `.venv` and `scripts/` linked, as in
a checkout) with what a reader's machine has after `make up`: the service's settings in the
environment (those of the test's API process), the project's Python first on PATH and its
packages on PYTHONPATH, `ADMIN_KEY`, the admin key that process was started with (the reader
makes one in docs/tenants.md), `YOUR_KEY`, an API key of it (the deployment guide's reader has
one), and `OPENAI_BASE_URL` and `OPENAI_API_KEY` of a scripted OpenAI-compatible server on
loopback that answers with what it was shown (bench/scripted_llm.py). Only the URLs of the API
(:8000, or the deployment guide's https://memory.example.com) and of the model service (:8090),
the development key and the names of users and tenants are swapped for the test's, so that no
two runs share data; then each page's session must print what the page says it does (EXPECTED),
and every key of a JSON response the page shows (a `json` block marked `<!-- output -->`) must
be in what it printed."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.scripted_llm import Reply, ScriptedLLM
from tests import services
from tests.conftest import ADMIN_KEY, API_KEY, ApiProcess
from tests.doc_blocks import ROOT, Block, blocks, of_kind

SESSIONS = sorted({block.page.relative_to(ROOT).as_posix() for block in of_kind("session")})
# The users and tenants the pages name: each run gets names of its own.
NAMES = ("alice", "bob", "acme", "globex", "smoke")
URL = re.compile(r"(?:https?://)?(?:127\.0\.0\.1|localhost):8000\b|https://memory\.example\.com\b")
MODEL_URL = re.compile(r"(?:https?://)?(?:127\.0\.0\.1|localhost):8090\b")
END = "COGNIS_DOCS_PYTHON"
FAILING_CURL = "curl -sS --fail-with-body"

# What each page's session must print (after the names are swapped: {alice} is this run's).
EXPECTED: dict[str, list[str]] = {
    "docs/api.md": [
        '"user_id":"{alice}"',
        "I moved to Osaka",
        '"current_version_id":',  # the stale If-Match: 412
        "\n412\n",
        "I booked a new dentist",
    ],
    "docs/ingestion.md": ['"user_id":"{alice}"', "I moved to Osaka", '"decisions":'],
    "docs/clients.md": ['"user_id":"{alice}"', "I moved to Osaka", '"operation":"ADD"'],
    "docs/context.md": [
        "I live in Nantes (changed from: I live in Lyon)",
        "(dietary) I am vegetarian",
        # The agent's LLM (scripted) was shown the block.
        "scripted answer to: You are a helpful assistant",
    ],
    "docs/tenants.md": ['"name":"{acme}"', "401\n", '"name":"{globex}"', '"revoked_at":"'],
    "docs/import-export.md": [
        '"imported":2',  # the two lines of history.jsonl
        '"skipped":2',  # ...again, by the CLI
        '"imported":1',  # the mem0 export, by the CLI
        '"skipped":1',  # ...again, through the API
        '"imported":3',  # alice's three memories, into tenant acme
    ],
    "docs/retrieval.md": ['"explanation":', "I went hiking in Hakone"],
    "docs/languages.md": ['"language":"ja"', "大阪出張"],
    "docs/embedding.md": ['{"object":"list"', '"memories":'],
    # The smoke test: ready, a write, the search's first hit (printed by jq).
    "docs/deployment.md": ['"status":"ready"', '"user_id":"{smoke}"', '"I live in Tokyo"\n'],
    "docs/scale-out.md": ["failed=0", "queued 1 memory versions in all"],
    "clients/python/README.md": ["1 I live in Tokyo"],
}


def session(page: str) -> str:
    """The page's session blocks as one bash script, in order."""
    parts = []
    for block in blocks(ROOT / page):
        if block.kind != "session":
            continue
        parts.append(as_bash(block))
    return "\n".join(parts)


def shown_keys(page: str) -> set[str]:
    """Every key of the JSON responses the page shows (its `json` output blocks)."""

    def keys(value: object) -> set[str]:
        if isinstance(value, dict):
            return set(value).union(*(keys(v) for v in value.values()))
        if isinstance(value, list):
            return set().union(*(keys(v) for v in value))
        return set()

    return set().union(
        *(
            keys(json.loads(block.code))
            for block in blocks(ROOT / page)
            if block.kind == "output" and block.language == "json"
        )
    )


def named(text: str, names: dict[str, str]) -> str:
    """`text` with {alice} and the like as this run's names."""
    for name, own in names.items():
        text = text.replace(f"{{{name}}}", own)
    return text


def as_bash(block: Block) -> str:
    if block.language == "bash":
        return block.code
    assert block.language == "python", block.where
    return f"python - <<'{END}'\n{block.code}{END}\n"


def as_test_runs_it(
    script: str, url: str, names: dict[str, str], model_url: str = "http://model:8090"
) -> str:
    script = MODEL_URL.sub(model_url, URL.sub(url, script)).replace("cognis-dev-key", API_KEY)
    for name, own in names.items():
        script = re.sub(rf"\b{name}\b", own, script)
    return "\n".join(
        line
        if "%{http_code}" in line
        else re.sub(r"\bcurl -s\b", "curl -sS --fail-with-body", line)
        for line in script.split("\n")
    )


@pytest.fixture(scope="module")
def agents_llm() -> Iterator[ScriptedLLM]:
    """The LLM of the pages' agents: it answers with the messages it was shown."""
    server = ScriptedLLM(
        default=lambda request: Reply(content=f"scripted answer to: {request.text}")
    )
    yield server
    server.close()


def environment(api: ApiProcess, llm: ScriptedLLM, folder: Path) -> dict[str, str]:
    python = Path(sys.executable).parent
    for shared in (".venv", "scripts"):
        (folder / shared).symlink_to(ROOT / shared)
    return {
        **api.env,
        "PATH": f"{python}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'clients' / 'python'}",
        "ADMIN_KEY": ADMIN_KEY,
        "YOUR_KEY": API_KEY,
        "OPENAI_BASE_URL": llm.base_url,
        "OPENAI_API_KEY": "scripted",
        "MEM0_TELEMETRY": "false",
    }


def run_session(
    script: str, api: ApiProcess, llm: ScriptedLLM, folder: Path
) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=folder,
        env=environment(api, llm, folder),
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )


@pytest.mark.parametrize("page", SESSIONS)
def test_a_pages_session_runs_as_written(
    api: ApiProcess, agents_llm: ScriptedLLM, page: str, tmp_path: Path
) -> None:
    suffix = uuid.uuid4().hex[:8]
    names = {name: f"{name}-{suffix}" for name in NAMES}
    script = as_test_runs_it(session(page), api.url, names, services.embedding_server_url())
    done = run_session(script, api, agents_llm, tmp_path)
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-4000:])
    printed = done.stdout.replace(" ", "")
    missing = [
        text
        for text in EXPECTED.get(page, [])
        if named(text, names).replace(" ", "") not in printed
    ]
    assert not missing, (missing, done.stdout[-4000:])
    unseen = {key for key in shown_keys(page) if f'"{key}":' not in printed}
    assert not unseen, f"{page} shows keys its session's responses lack: {unseen}"


def test_the_keys_of_a_shown_response_are_found(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text('<!-- output -->\n```json\n{"a": [{"b": 1}], "c": {"d": null}}\n```\n')
    assert shown_keys(str(page)) == {"a", "b", "c", "d"}


def test_every_session_says_what_it_must_print() -> None:
    assert set(SESSIONS) == set(EXPECTED), set(SESSIONS) ^ set(EXPECTED)
    assert {"docs/api.md", "docs/ingestion.md"} <= set(SESSIONS)


def test_the_harness_fails_on_an_unset_variable_and_an_error_status(tmp_path: Path) -> None:
    unset = subprocess.run(["bash", "-euo", "pipefail", "-c", "echo $NEVER_SET"], check=False)
    assert unset.returncode != 0
    script = as_test_runs_it(
        "curl -s http://127.0.0.1:8000/users/alice\ncurl -s localhost:8000/x -w '%{http_code}'",
        "http://h:1",
        {"alice": "a2"},
    )
    assert script == (
        "curl -sS --fail-with-body http://h:1/users/a2\ncurl -s http://h:1/x -w '%{http_code}'"
    )
    failed = subprocess.run(["bash", "-c", as_test_runs_it("curl -s http://127.0.0.1:1/", "", {})])
    assert failed.returncode != 0


def test_python_blocks_run_in_the_bash_session_in_order(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    text = (
        "<!-- session -->\n```bash\nexport X=1; echo one\n```\n"
        "<!-- session -->\n```python\nimport os\nprint('two', os.environ['X'])\n```\n"
        "<!-- session -->\n```bash\necho three\n```\n"
    )
    script = "\n".join(as_bash(block) for block in blocks(page, text))
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        capture_output=True,
        text=True,
        env={**os.environ, "PATH": path},
        check=False,
    )
    assert done.stdout.split("\n") == ["one", "two 1", "three", ""], done.stderr
