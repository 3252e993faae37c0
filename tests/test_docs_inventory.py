"""Every fenced code block of the README and docs/ is run by a test, or says, where a reader sees
it, why it is not (the classes: tests/doc_blocks.py; the convention: docs/development.md,
"Examples in the docs"). A block without a marker, or with one that does not fit it, fails."""

from __future__ import annotations

from pathlib import Path

from tests.doc_blocks import ROOT, Block, blocks, every_block

# A block runs in a page's session only in a language the session runs.
SESSION_LANGUAGES = {"bash", "python"}


def problems(block: Block) -> list[str]:
    """What is wrong with a block's class, if anything."""
    if block.kind is None:
        return [f"{block.where}: no class (marker: {block.marker!r})"]
    if block.kind == "session" and block.language not in SESSION_LANGUAGES:
        return [f"{block.where}: a session runs bash and python, not {block.language!r}"]
    if block.kind == "sql-role" and block.language != "sql":
        return [f"{block.where}: sql-role on a {block.language!r} block"]
    if block.kind == "run-by":
        test = ROOT / block.argument
        if not test.is_file():
            return [f"{block.where}: {block.argument} does not exist"]
        source = test.read_text()
        if "run_by(__file__" not in source:
            return [f"{block.where}: {block.argument} never asks for its blocks (run_by)"]
        if block.page.name not in source:
            return [f"{block.where}: {block.argument} never names {block.page.name}"]
    if block.kind == "not-run" and len(block.argument.split()) < 3:
        return [f"{block.where}: say why it is not run, in words ({block.argument!r})"]
    return []


def test_every_block_is_run_or_says_why_not() -> None:
    found = every_block()
    assert len(found) > 50  # the pages have blocks: a parser that saw none would pass
    wrong = [problem for block in found for problem in problems(block)]
    assert not wrong, "\n".join(wrong)


def test_the_inventory_is_not_fooled(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    text = "\n".join(
        [
            "<!-- session -->",
            "```bash",
            "echo one",
            "```",
            "<!-- session -->",
            "",  # a marker must be right above the fence: this block has none
            "```bash",
            "echo two",
            "```",
            "- a list:",
            "  <!-- not run: needs a Kubernetes cluster -->",
            "  ```bash",
            "  helm install x",
            "  ```",
            "<!-- output -->",
            "~~~json",
            '{"a": "```"}',  # a fence of another kind inside does not end it
            "~~~",
            "<!-- not run: no -->",
            "```",
            "text",
            "```",
            "<!-- session -->",
            "```sql",
            "SELECT 1;",
            "```",
            "<!-- run by tests/no_such_test.py -->",
            "```python",
            "pass",
            "```",
            "<!-- skip -->",
            "```",
            "x",
            "```",
        ]
    )
    found = blocks(page, text)
    assert [b.kind for b in found] == [
        "session",
        None,
        "not-run",
        "output",
        "not-run",
        "session",
        "run-by",
        None,
    ]
    assert found[2].code == "helm install x\n" and found[2].argument == "needs a Kubernetes cluster"
    assert found[3].code == '{"a": "```"}\n'
    page.write_text(text)  # Block.where needs a page under ROOT: place it there in name only
    moved = [Block(ROOT / "docs" / "x.md", b.line, b.language, b.marker, b.code) for b in found]
    assert [bool(problems(b)) for b in moved] == [False, True, False, False, True, True, True, True]
