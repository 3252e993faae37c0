"""The TypeScript client (clients/typescript) against the real API process: its vitest suite
(each test must pass, none skipped), its generated types against the API's own OpenAPI
document, and its npm package: packed, installed into an empty project, imported, and the
docs/clients.md's TypeScript example run there as written."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import uuid
from pathlib import Path

import httpx
import pytest

from tests.conftest import API_KEY, ROOT, ApiProcess
from tests.doc_blocks import one_run_by, run_by

TS = ROOT / "clients" / "typescript"
BIN = TS / "node_modules" / ".bin"
# The vitest suite (test/client.test.ts): a test renamed or dropped there must show here.
VITEST_TESTS = 18
REGENERATE = "cd clients/typescript && npm run openapi && npm run generate"


def run(*args: str | Path, cwd: Path = TS, env: dict[str, str] | None = None, timeout: float = 600):
    return subprocess.run(
        [str(a) for a in args],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def checked(*args: str | Path, **kwargs) -> subprocess.CompletedProcess:
    result = run(*args, **kwargs)
    assert result.returncode == 0, f"{args}:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


@pytest.fixture(scope="module")
def node_modules() -> Path:
    """clients/typescript/node_modules as package-lock.json pins it: `npm ci` (from npm's
    cache after the first time) unless the stamp of scripts/install-test-tools.sh says it is
    current."""
    if shutil.which("npm") is None or shutil.which("node") is None:
        pytest.fail("node and npm are missing: `make install-test` installs them")
    want = hashlib.sha256((TS / "package-lock.json").read_bytes()).hexdigest()
    stamp = TS / "node_modules" / ".cognis-lock.sha256"
    if not stamp.exists() or stamp.read_text().strip() != want:
        checked("npm", "ci", "--no-audit", "--no-fund", "--prefer-offline", "--loglevel=error")
        stamp.write_text(want + "\n")
    return TS / "node_modules"


def test_the_vitest_suite_passes_against_the_api(
    api: ApiProcess, node_modules: Path, tmp_path: Path
) -> None:
    report_path = tmp_path / "vitest.json"
    result = run(
        BIN / "vitest",
        "run",
        "--reporter=json",
        f"--outputFile={report_path}",
        env={"COGNIS_URL": api.url, "COGNIS_API_KEY": API_KEY, "NO_COLOR": "1"},
    )
    assert report_path.exists(), f"vitest wrote no report:\n{result.stdout[-4000:]}"
    report = json.loads(report_path.read_text())
    outcomes = {
        test["fullName"]: (test["status"], " ".join(test.get("failureMessages", []))[:2000])
        for file in report["testResults"]
        for test in file["assertionResults"]
    }
    failed = {name: outcome for name, outcome in outcomes.items() if outcome[0] != "passed"}
    assert failed == {}, result.stdout[-4000:] + result.stderr[-2000:]
    assert len(outcomes) == VITEST_TESTS, sorted(outcomes)
    assert report["numPassedTests"] == VITEST_TESTS and result.returncode == 0


def test_the_generated_types_are_those_of_the_api_document(
    api: ApiProcess, node_modules: Path
) -> None:
    served = httpx.get(f"{api.url}/schema/openapi.json", timeout=30).json()
    committed = json.loads((TS / "openapi.json").read_text())
    assert committed == served, f"clients/typescript/openapi.json is stale: {REGENERATE}"
    check = run("npm", "run", "-s", "check:schema")
    assert check.returncode == 0, f"src/schema.d.ts is stale: {REGENERATE}\n{check.stderr}"
    checked(BIN / "tsc", "--noEmit", "-p", ".")  # strict, the tests included


def test_npm_pack_installs_and_the_readme_example_runs(
    api: ApiProcess, node_modules: Path, tmp_path: Path
) -> None:
    packed = checked("npm", "pack", "--json", "--pack-destination", tmp_path)
    (tarball,) = json.loads(packed.stdout[packed.stdout.index("[") :])
    names = {entry["path"] for entry in tarball["files"]}
    assert {"dist/index.js", "dist/index.d.ts", "dist/schema.d.ts", "package.json"} <= names
    assert not any(name.startswith(("src/", "test/", "node_modules/")) for name in names)

    project = tmp_path / "project"
    project.mkdir()
    (project / "package.json").write_text('{"name": "consumer", "private": true, "type": "module"}')
    # No runtime dependencies: the install needs nothing but the tarball.
    checked(
        "npm",
        "install",
        "--offline",
        "--no-audit",
        "--no-fund",
        tmp_path / tarball["filename"],
        cwd=project,
    )

    example = readme_typescript_example()
    (project / "example.ts").write_text(example)
    type_checked(project / "example.ts", node_modules)
    # The example is TypeScript without annotations: Node runs the same text as a module.
    (project / "example.mjs").write_text(example)
    ran = checked(
        "node", "example.mjs", cwd=project, env={"COGNIS_URL": api.url, "COGNIS_API_KEY": API_KEY}
    )
    assert "[ 'I live in Tokyo', 'I moved to Osaka' ]" in ran.stdout, ran.stdout
    assert "404" in ran.stdout and "ADD" in ran.stdout, ran.stdout

    # The package README's example, and its error handling after it, type-checked and run too.
    user = f"alice-{uuid.uuid4().hex[:8]}"
    readme = package_readme_example().replace("http://127.0.0.1:8000", api.url)
    readme = readme.replace("cognis-dev-key", API_KEY).replace('"alice"', f'"{user}"')
    (project / "readme.ts").write_text(readme)
    type_checked(project / "readme.ts", node_modules)
    (project / "readme.mjs").write_text(readme)
    ran = checked("node", "readme.mjs", cwd=project)
    # Every version the export streams: the first and the update.
    assert ran.stdout.split("\n")[:2] == ["I live in Tokyo", "I moved to Osaka"], ran.stdout
    listed = httpx.get(
        f"{api.url}/v1/users/{user}/memories", headers={"X-API-Key": API_KEY}, timeout=60
    )
    contents = {m["content"] for m in listed.json()["items"]}
    assert contents == {"I moved to Osaka", "Prefers aisle seats"}, contents


def type_checked(module: Path, node_modules: Path) -> None:
    """`tsc --strict` on one module of the consumer project, against the installed package."""
    checked(
        BIN / "tsc",
        "--noEmit",
        "--strict",
        "--target", "es2022",
        "--module", "nodenext",
        "--moduleResolution", "nodenext",
        "--typeRoots", node_modules / "@types",
        "--types", "node",
        module.name,
        cwd=module.parent,
    )  # fmt: skip


def readme_typescript_example() -> str:
    return one_run_by(__file__, "docs/clients.md", 'from "cognis-memory-client"')


def package_readme_example() -> str:
    """The TypeScript blocks of clients/typescript/README.md, in order, as one module."""
    page = ROOT / "clients" / "typescript" / "README.md"
    return "\n".join(b.code for b in run_by(__file__) if b.page == page and b.language == "ts")
