"""docs/deployment.md and terraform/README.md name only things that exist; the README and every
page of docs/ name only `python -m app` commands and make targets that exist."""

from __future__ import annotations

import re

import pytest

from tests.deploy.files import ROOT, TERRAFORM, load_compose, load_module, load_root
from tests.deploy.test_dockerfile import _cli_commands

GUIDES = [ROOT / "docs" / "deployment.md", TERRAFORM / "README.md"]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), TERRAFORM / "README.md"]


def _text() -> str:
    return "\n".join(path.read_text() for path in GUIDES)


def test_terraform_outputs_the_guides_read_exist() -> None:
    used = set(re.findall(r"terraform output -(?:raw|json) (\w+)", _text()))
    assert used, "the guide reads no outputs?"
    assert used <= set(load_root().outputs), used - set(load_root().outputs)


def test_variables_the_guides_set_exist() -> None:
    text = _text()
    used = set(re.findall(r"-var (\w+)=", text))
    used |= set(re.findall(r"`(\w+_desired_count|aurora_\w+|alb_\w+|api_key_hashes)`", text))
    assert used <= set(load_root().variables), used - set(load_root().variables)


def test_one_off_tasks_the_guide_runs_exist() -> None:
    used = set(re.findall(r"run_task ([a-z-]+)", _text())) - {"definition"}
    keys = set(load_module("ecs").locals["processes"]) | {"opensearch-bootstrap", "db-logins"}
    assert used and used <= keys, used - keys


def test_replaced_resources_exist() -> None:
    replaced = re.findall(r"-replace=module\.(\w+)\.(\w+)\.(\w+)", _text())
    assert replaced, "the guide replaces no resource?"
    for module, kind, name in replaced:
        assert name in load_module(module).resources[kind], (module, kind, name)


# Command names may hold hyphens (embed-serve).
CLI_COMMAND = r"python\"?,? \"?-m\"?,? \"?app\"?,? \"?(\w[\w-]*)"


def make_targets(text: str) -> set[str]:
    """The targets of `make X` in inline code and of lines of code blocks that run make."""
    inline = re.findall(r"`make ([a-z][a-z-]*)", text)
    blocks = "\n".join(re.findall(r"```.*?```", text, flags=re.S))
    return set(inline) | set(re.findall(r"^\s*(?:.*(?:&&|;) )?make ([a-z][a-z-]*)", blocks, re.M))


@pytest.mark.parametrize("path", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_cli_commands_and_make_targets_in_the_docs_exist(path) -> None:
    text = path.read_text()
    assert set(re.findall(CLI_COMMAND, text)) <= _cli_commands()
    makefile = (ROOT / "Makefile").read_text()
    targets = make_targets(text)
    assert {t for t in targets if not re.search(rf"^{t}:", makefile, flags=re.M)} == set()


def test_the_docs_name_commands_and_targets_at_all() -> None:
    """Guards the test above against a pattern that stopped matching anything."""
    text = "\n".join(path.read_text() for path in PAGES)
    assert {"serve", "relay", "worker", "migrate"} <= set(re.findall(CLI_COMMAND, text))
    assert {"up", "test", "reindex"} <= make_targets(text)


def test_make_targets_and_compose_services_in_the_guide_exist() -> None:
    guide = (ROOT / "docs" / "deployment.md").read_text()
    makefile = (ROOT / "Makefile").read_text()
    for target in set(re.findall(r"\bmake ([a-z-]+)", guide)):
        assert re.search(rf"^{target}:", makefile, flags=re.M), target
    services = set(load_compose()["services"])
    for service in set(re.findall(r"--scale (\w+)=", guide)) | set(
        re.findall(r"docker compose run --rm (\w+)", guide)
    ):
        assert service in services, service
