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
        # app.idempotency: a table of stored responses; the retention job (app/db/retention.py)
        # purges expired ones, like the outbox's delivered rows, never the relay.
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


# Seams inside a layer (docs/architecture.md, "Layers and composition"): which module may import
# which, where one package's modules do different jobs.
SCHEDULER = "app.ml.scheduling"
# The scheduler's modules, each with the ones it may import: the vocabulary below everything,
# fair queuing and the speed model beside each other, the dispatcher over all three.
SCHEDULER_SEAMS = {
    f"{SCHEDULER}.work": set[str](),
    f"{SCHEDULER}.fair_queue": {f"{SCHEDULER}.work"},
    f"{SCHEDULER}.speed": {f"{SCHEDULER}.work"},
    f"{SCHEDULER}.dispatcher": {
        f"{SCHEDULER}.work",
        f"{SCHEDULER}.fair_queue",
        f"{SCHEDULER}.speed",
    },
}
# What a refusal tells an HTTP client is the API's wording (app/api/deadlines.py).
HTTP_WORDING = ("Retry-After", "X-Cognis-", "/v1/", "HTTP")


def _string_literals(path: Path) -> list[str]:
    """The string constants of a module that are not docstrings."""
    tree = ast.parse(path.read_text(), str(path))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
    ]


def test_the_scheduler_modules_keep_their_jobs_apart() -> None:
    graph = import_graph()
    scheduler = {m for m in graph if m.startswith(SCHEDULER + ".")}
    assert scheduler == set(SCHEDULER_SEAMS), "a scheduler module without its place in the seams"
    wrong = {
        module: sorted(graph[module] & scheduler - allowed)
        for module, allowed in SCHEDULER_SEAMS.items()
        if graph[module] & scheduler - allowed
    }
    assert not wrong, f"scheduler modules importing across their seams: {wrong}"


def test_only_the_embedders_drive_the_dispatcher() -> None:
    """Callers outside app/ml/ speak the scheduler's vocabulary (`Work`, `Deadline`); queuing,
    speed and dispatch are the embedders' business."""
    offending = sorted(
        f"{source} -> {target}"
        for source, targets in import_graph().items()
        if not source.startswith("app.ml.")
        for target in targets
        if target.startswith(SCHEDULER) and target != f"{SCHEDULER}.work"
    )
    assert not offending, "imports of the scheduler's inside from outside app/ml/:\n" + "\n".join(
        offending
    )


def test_the_scheduler_speaks_no_http() -> None:
    spoken = sorted(
        f"{path.relative_to(ROOT)}: {literal[:60]!r}"
        for path in sorted((APP / "ml" / "scheduling").glob("*.py"))
        for literal in _string_literals(path)
        if any(word in literal for word in HTTP_WORDING)
    )
    assert not spoken, "HTTP wording in the scheduler (it belongs in app/api/deadlines.py):\n" + (
        "\n".join(spoken)
    )


def test_erasure_is_one_module_and_the_lock_only_the_lock() -> None:
    """The erase SQL lives in app/memories/erasure.py; the lock module imports no other
    module of the store, and only erasure takes the lock exclusively."""
    graph = import_graph()
    lock = "app.memories.user_lock"
    assert not {m for m in graph[lock] if m.startswith("app.memories")}, graph[lock]
    exclusive = sorted(
        module
        for module, path in app_modules().items()
        if module != lock and "hold_for_erase" in path.read_text()
    )
    assert exclusive == ["app.memories.erasure"], exclusive


def test_background_loops_live_where_the_layering_says() -> None:
    """Loops that claim queued work and write through the store run beside the ingestion
    workers (app/ingest/); the store's only loop is its own chore, the expiry reaper; the
    outbox relay keeps no other table (the retention job purges idempotency keys)."""
    loops = sorted(
        module
        for module, path in app_modules().items()
        for node in ast.walk(ast.parse(path.read_text(), str(path)))
        if isinstance(node, ast.AsyncFunctionDef) and node.name == "run_forever"
    )
    stores = [m for m in loops if placement(m) is not None and placement(m)[1] == "app.memories"]
    assert stores == ["app.memories.expiry_reaper"], (
        f"loops in the store: {stores}; a worker that embeds or writes through the service runs "
        "beside the ingestion workers (app/ingest/, as sentence_worker.py)"
    )
    # The sentence and entity workers share one loop (app/ingest/idle_worker.py).
    assert {"app.ingest.worker", "app.ingest.batch_worker", "app.ingest.idle_worker"} <= set(loops)
    relay = app_modules()["app.search_index.relay"]
    assert "idempotency" not in relay.read_text().lower()
    assert not {m for m in import_graph()["app.search_index.relay"] if "idempotency" in m}


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
