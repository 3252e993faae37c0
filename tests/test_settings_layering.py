"""Who sees the whole `Settings`, read from the source: only the composition roots.

Every other module of app/ is given the settings groups it reads (`RetrievalSettings`,
`StoreSettings`, ...): it neither imports `Settings` or `get_settings` from app.config nor
declares a parameter, field or variable of type `Settings`. A component that reads several
groups takes each (`relay: RelaySettings, store: StoreSettings`). The API's controllers read
their group from the runtime the composition root built (`runtime.settings.relay`).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
APP = ROOT / "app"

# Where the whole is built and handed out, group by group.
COMPOSITION_ROOTS = (
    "app/config/",  # the settings themselves
    "app/runtime.py",  # the service's parts
    "app/asgi.py",  # the API application
    "app/cli/",  # the commands
    "app/__main__.py",
    # The model service's own entry point (`python -m app embed-serve`), built without a
    # runtime (its process never opens the database).
    "app/ml/embedding_server.py",
)

WHOLE_NAMES = {"Settings", "get_settings"}


def app_modules() -> list[Path]:
    return sorted(APP.rglob("*.py"))


def relative(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def is_composition_root(path: Path) -> bool:
    return relative(path).startswith(COMPOSITION_ROOTS)


def whole_settings_uses(path: Path) -> list[str]:
    """Where a module imports the whole settings or declares something of its type."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module == "app.config":
            found += [
                f"{node.lineno}: imports {a.name}" for a in node.names if a.name in WHOLE_NAMES
            ]
        elif isinstance(node, ast.Import):
            found += [
                f"{node.lineno}: imports app.config" for a in node.names if a.name == "app.config"
            ]
        annotation = None
        if isinstance(node, ast.arg | ast.AnnAssign):
            annotation = node.annotation
        if annotation is not None:
            names = {n.id for n in ast.walk(annotation) if isinstance(n, ast.Name)}
            names |= {
                n.value for n in ast.walk(annotation) if isinstance(n, ast.Constant)
            } & WHOLE_NAMES
            if "Settings" in names:
                found.append(f"{node.lineno}: declares {ast.unparse(annotation)}")
    return found


def test_only_the_composition_roots_see_the_whole_settings() -> None:
    offenders = {
        relative(path): uses
        for path in app_modules()
        if not is_composition_root(path) and (uses := whole_settings_uses(path))
    }
    assert offenders == {}, "give these the settings groups they read, not the whole"


def test_the_check_sees_a_component_that_takes_the_whole(tmp_path: Path) -> None:
    component = tmp_path / "component.py"
    component.write_text(
        "from app.config import RetrievalSettings, Settings\n"
        "def plan(settings: Settings) -> None: ...\n"
        "def fine(settings: RetrievalSettings) -> None: ...\n"
    )
    assert whole_settings_uses(component) == [
        "1: imports Settings",
        "2: declares Settings",
    ]
