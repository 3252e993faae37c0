"""Readers for the deployment files: Terraform (python-hcl2, normalised), compose, Dockerfile.

The deploy tests need no services: they read files and never request the fixtures of
tests/conftest.py.
"""

from __future__ import annotations

import json
import re
import textwrap
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import hcl2
import yaml

ROOT = Path(__file__).resolve().parents[2]
TERRAFORM = ROOT / "terraform"
COMPOSE = ROOT / "compose.yaml"
DOCKERFILE = ROOT / "Dockerfile"

_REFERENCE = re.compile(r"^\$\{(var|local)\.([A-Za-z0-9_]+)\}$")


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] == '"':
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value[1:-1]
    return value


def _normalise(value: Any) -> Any:
    """python-hcl2 keeps quotes and block markers; tests want plain values."""
    if isinstance(value, dict):
        return {
            _unquote(k): _normalise(v)
            for k, v in value.items()
            if k not in ("__is_block__", "__comments__")
        }
    if isinstance(value, list):
        return [_normalise(v) for v in value]
    if isinstance(value, str):
        return _unquote(value)
    return value


def heredoc_text(value: str) -> str:
    """The body of a `<<-EOF` heredoc as HCL hands it over (indented form dedented)."""
    lines = value.split("\n")
    assert lines[0].startswith("<<"), value[:40]
    return textwrap.dedent("\n".join(lines[1:-1])) + "\n"


@dataclass
class Module:
    path: Path
    resources: dict[str, dict[str, dict]] = field(default_factory=dict)
    data: dict[str, dict[str, dict]] = field(default_factory=dict)
    variables: dict[str, dict] = field(default_factory=dict)
    outputs: dict[str, dict] = field(default_factory=dict)
    modules: dict[str, dict] = field(default_factory=dict)
    locals: dict[str, Any] = field(default_factory=dict)
    # module name in the root configuration that calls this module (None for the root)
    caller: str | None = None

    def resource(self, kind: str, name: str) -> dict:
        return self.resources[kind][name]

    def resolve(self, value: Any) -> Any:
        """Follow `var.x` through the root module call and root variable defaults."""
        for _ in range(5):
            match = _REFERENCE.match(value) if isinstance(value, str) else None
            if match is None:
                return value
            scope, name = match.groups()
            if scope == "local":
                value = self.locals[name]
                continue
            if self.caller is not None:
                call = load_root().modules[self.caller]
                if name in call:
                    return load_root().resolve(call[name])
            value = self.variables[name].get("default")
        return value


def _load_module(path: Path, caller: str | None = None) -> Module:
    module = Module(path=path, caller=caller)
    for tf in sorted(path.glob("*.tf")):
        with tf.open() as handle:
            parsed = _normalise(hcl2.load(handle))
        for block in parsed.get("resource", []):
            for kind, named in block.items():
                module.resources.setdefault(kind, {}).update(named)
        for block in parsed.get("data", []):
            for kind, named in block.items():
                module.data.setdefault(kind, {}).update(named)
        for block in parsed.get("variable", []):
            module.variables.update(block)
        for block in parsed.get("output", []):
            module.outputs.update(block)
        for block in parsed.get("module", []):
            module.modules.update(block)
        for block in parsed.get("locals", []):
            module.locals.update(block)
    return module


@cache
def load_root() -> Module:
    return _load_module(TERRAFORM)


@cache
def load_module(name: str) -> Module:
    root = load_root()
    callers = [call for call, body in root.modules.items() if body["source"] == f"./modules/{name}"]
    assert len(callers) == 1, f"module {name} is called {len(callers)} times"
    return _load_module(TERRAFORM / "modules" / name, caller=callers[0])


def all_modules() -> list[Module]:
    return [load_root()] + [load_module(p.name) for p in sorted((TERRAFORM / "modules").iterdir())]


@cache
def load_compose() -> dict[str, Any]:
    with COMPOSE.open() as handle:
        return yaml.safe_load(handle)


def dockerfile_stages() -> list[list[str]]:
    """Instructions per stage, continuation lines joined, comments dropped."""
    stages: list[list[str]] = []
    logical: list[str] = []
    current = ""
    for raw in DOCKERFILE.read_text().splitlines():
        line = raw.strip()
        if not current and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):
            continue
        if line.endswith("\\"):
            current += line[:-1] + "\n"
            continue
        logical.append(current + line)
        current = ""
    for instruction in logical:
        if instruction.upper().startswith("FROM "):
            stages.append([])
        if stages:
            stages[-1].append(instruction)
    return stages
