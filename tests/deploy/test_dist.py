"""`make dist` (scripts/dist.sh): each artefact is there, its checksum holds, and it installs
the way a user would install it, offline: the wheel with pip --no-deps --no-index, the npm
package into an empty project, the chart through helm, the image's build context holding what
the Dockerfile copies. Nothing is uploaded."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest
import yaml

from tests.deploy.files import ROOT

pytestmark = pytest.mark.slow  # about 20 s: a wheel build, npm pack (tsc), helm package

VERSION = tomllib.loads((ROOT / "clients" / "python" / "pyproject.toml").read_text())["project"][
    "version"
]
EXPECTED = {
    f"cognis_memory_client-{VERSION}-py3-none-any.whl",
    f"cognis-memory-client-{VERSION}.tgz",
    f"cognis-memory-{VERSION}.tgz",
    f"cognis-memory-image-{VERSION}-context.tar.gz",
}


def run(*args: str | Path, **kwargs) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [str(a) for a in args], capture_output=True, text=True, timeout=600, check=False, **kwargs
    )
    assert result.returncode == 0, f"{args}:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


def dist(directory: Path) -> Path:
    if shutil.which("npm") is None:
        pytest.skip("npm is missing: `make install-test` installs node and npm")
    run("bash", ROOT / "scripts" / "dist.sh", cwd=ROOT, env={**os.environ, "DIST": str(directory)})
    return directory


@pytest.fixture(scope="module")
def artefacts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return dist(tmp_path_factory.mktemp("dist"))


def test_every_artefact_is_there_with_its_checksum(artefacts: Path) -> None:
    names = {p.name for p in artefacts.iterdir()} - {"SHA256SUMS"}
    assert names >= EXPECTED, names
    sums = dict(
        reversed(line.split()) for line in (artefacts / "SHA256SUMS").read_text().splitlines()
    )
    assert set(sums) == names
    for name, digest in sums.items():
        assert hashlib.sha256((artefacts / name).read_bytes()).hexdigest() == digest, name


def test_the_wheel_installs_offline_and_imports_from_itself(
    artefacts: Path, tmp_path: Path
) -> None:
    """Its name is the distribution's, not PyPI's unrelated `cognis-client`; installed with
    --no-deps --no-index into a folder of its own, `cognis_client` imports from there (its
    dependencies, httpx and msgspec, from this interpreter's environment)."""
    wheel = artefacts / f"cognis_memory_client-{VERSION}-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as archive:
        metadata = archive.read(f"cognis_memory_client-{VERSION}.dist-info/METADATA").decode()
        files = archive.namelist()
    assert "Name: cognis-memory-client" in metadata.splitlines()
    assert "cognis_client/py.typed" in files
    assert not [f for f in files if f.startswith(("app/", "tests/"))]
    target = tmp_path / "site"
    run(sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
        "--target", target, wheel)  # fmt: skip
    imported = run(
        sys.executable,
        "-c",
        "import cognis_client, importlib.metadata as m; "
        "print(cognis_client.__file__); print(m.version('cognis-memory-client'))",
        env={**os.environ, "PYTHONPATH": str(target)},
        cwd=tmp_path,
    ).stdout.split()
    assert Path(imported[0]).is_relative_to(target), imported
    assert imported[1] == VERSION


def test_the_npm_package_installs_offline_and_imports(artefacts: Path, tmp_path: Path) -> None:
    tarball = artefacts / f"cognis-memory-client-{VERSION}.tgz"
    project = tmp_path / "project"
    project.mkdir()
    (project / "package.json").write_text('{"name": "consumer", "private": true, "type": "module"}')
    run("npm", "install", "--offline", "--no-audit", "--no-fund", tarball, cwd=project)
    out = run(
        "node",
        "-e",
        "import('cognis-memory-client').then(m => console.log(typeof m.CognisClient))",
        cwd=project,
    ).stdout
    assert out.strip() == "function"


def test_the_chart_package_renders(artefacts: Path) -> None:
    chart = artefacts / f"cognis-memory-{VERSION}.tgz"
    with tarfile.open(chart) as archive:
        names = archive.getnames()
        meta = yaml.safe_load(archive.extractfile("cognis-memory/Chart.yaml").read())  # type: ignore[union-attr]
    assert meta["version"] == VERSION
    assert {"cognis-memory/values.yaml", "cognis-memory/templates/NOTES.txt"} <= set(names)
    helm = os.environ.get("COGNIS_HELM") or shutil.which("helm")
    if helm is None:
        cached = sorted(Path.home().glob(".cache/cognis-memory/tools/helm-*/helm"))
        helm = str(cached[-1]) if cached else None
    if helm is None:
        pytest.skip("no helm binary to render the packaged chart with")
    rendered = run(helm, "template", "cognis", chart,
                   "--set", "secrets.databaseUrl=postgresql://a@b/c").stdout  # fmt: skip
    kinds = {d["kind"] for d in yaml.safe_load_all(rendered) if d}
    assert {"Deployment", "Job", "Secret", "Service"} <= kinds


def test_the_image_context_holds_what_the_dockerfile_copies(artefacts: Path) -> None:
    """No Docker engine here: the context `docker build` would be sent, checked statically."""
    with tarfile.open(artefacts / f"cognis-memory-image-{VERSION}-context.tar.gz") as archive:
        names = set(archive.getnames())
    assert {"Dockerfile", "pyproject.toml", "alembic.ini", "scripts/install-models.sh"} <= names
    assert "app/__main__.py" in names and "clients/python/pyproject.toml" in names
    assert not [n for n in names if n.startswith(("tests/", ".local/", "charts/", "dist/"))]
    assert not [n for n in names if "__pycache__" in n or ".egg-info" in n or "/build/" in n]
