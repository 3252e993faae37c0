"""The layering of app/, read from the source: no import circle between modules, no import of
a module from a higher layer, and wings of one layer that stand side by side never import
each other. Every import counts, including those inside functions and under TYPE_CHECKING.

Layers, lowest first (docs/architecture.md, "Layers and composition"). A new top-level module
or package must be placed here: an unplaced one fails the test.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
APP = ROOT / "app"


@dataclass(frozen=True)
class Layer:
    name: str
    members: tuple[str, ...]
    # Side by side: a member imports no other member of its layer.
    side_by_side: bool = False


LAYERS = (
    Layer(
        "settings and vocabulary",
        (
            "app",
            "app.config",
            "app.vocabulary",
            "app.errors",
            "app.logging",
            "app.metrics",
            # Traces: the SDK's setup and the spans every layer makes (app/tracing/).
            "app.tracing",
            "app.outages",
            "app.wakeup",
            "app.time_expressions",
        ),
    ),
    Layer(
        "infrastructure adapters",
        # app.idempotency: a table of stored responses, purged by the relay's housekeeping
        # like the outbox's delivered rows.
        (
            "app.db",
            "app.ml",
            "app.llm",
            "app.search_index",
            "app.idempotency",
            "app.in_process",
            # app.webhooks: queued by the outbox's writer hook, dispatched beside the relay.
            "app.webhooks",
        ),
    ),
    Layer("stores", ("app.memories", "app.tenants")),
    Layer("pipelines", ("app.ingest", "app.retrieval", "app.imports"), side_by_side=True),
    Layer("process composition", ("app.runtime",)),
    Layer("web", ("app.api", "app.console", "app.mcp_server"), side_by_side=True),
    Layer("ASGI composition", ("app.asgi",)),
    Layer("command line", ("app.cli", "app.__main__")),
)

# Imports allowed against the layering: none. A new entry needs a reason written beside it;
# test_allowance_is_still_needed says when one is no longer used.
ALLOWED_UPWARD: set[tuple[str, str]] = set()


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def app_modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(APP.rglob("*.py"))}


def imports_of(module: str, path: Path, modules: set[str]) -> set[str]:
    """The app modules `module` imports, anywhere in its source (`from a import b` counts as an
    import of a.b when that is a module)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base)
    return {name for name in found if name in modules and name != module}


def import_graph() -> dict[str, set[str]]:
    modules = app_modules()
    return {name: imports_of(name, path, set(modules)) for name, path in modules.items()}


def placement(module: str) -> tuple[int, str] | None:
    """(layer index, the member it belongs to), by the longest member that contains it."""
    best: tuple[int, str] | None = None
    for index, layer in enumerate(LAYERS):
        for member in layer.members:
            contains = module == member or module.startswith(member + ".")
            if contains and (best is None or len(member) > len(best[1])):
                best = (index, member)
    return best


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _allowed(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    return {a: {b for b in targets if (a, b) not in ALLOWED_UPWARD} for a, targets in graph.items()}


def test_every_module_has_a_layer() -> None:
    unplaced = sorted(m for m in app_modules() if placement(m) is None)
    assert not unplaced, f"modules in no layer (add them to LAYERS): {unplaced}"


def test_no_import_circle() -> None:
    graph = _allowed(import_graph())
    report = [
        " ; ".join(f"{a} -> {b}" for a in circle for b in sorted(graph[a]) if b in circle)
        for circle in circles(graph)
    ]
    assert not report, "import circles:\n" + "\n".join(report)


def test_no_import_up_or_across_wings() -> None:
    offending = []
    for source, targets in sorted(_allowed(import_graph()).items()):
        where = placement(source)
        assert where is not None, source
        for target in sorted(targets):
            there = placement(target)
            assert there is not None, target
            if there[0] > where[0]:
                offending.append(
                    f"{source} -> {target} (up: {LAYERS[where[0]].name} imports "
                    f"{LAYERS[there[0]].name})"
                )
            elif there[0] == where[0] and there[1] != where[1] and LAYERS[where[0]].side_by_side:
                offending.append(
                    f"{source} -> {target} (across the side-by-side {where[1]} and {there[1]})"
                )
    assert not offending, "imports against the layering:\n" + "\n".join(offending)


def test_allowance_is_still_needed() -> None:
    graph = import_graph()
    stale = sorted((a, b) for a, b in ALLOWED_UPWARD if b not in graph.get(a, set()))
    assert not stale, f"no longer imported, remove from ALLOWED_UPWARD: {stale}"


def test_the_checks_see_an_upward_import_inside_a_function(tmp_path: Path) -> None:
    """The parser itself: a function-level import and a relative import are edges."""
    source = tmp_path / "module.py"
    source.write_text(
        "def later():\n    from app.api import auth\n\nfrom ..search_index import outbox\n"
    )
    modules = {"app.api.auth", "app.api", "app.search_index.outbox", "app.memories.x"}
    found = imports_of("app.memories.x", source, modules)
    assert found == {"app.api.auth", "app.search_index.outbox"}
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
