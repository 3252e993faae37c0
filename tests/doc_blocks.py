"""The fenced code blocks of the READMEs (the project's, its clients', terraform/ and the Helm
chart's) and docs/, each with the class its page gives it.

Every block is preceded, on the line right above its opening fence, by one HTML comment that
says what happens to it (docs/development.md, "Examples in the docs"):

- `<!-- session -->`: a `bash` or `python` block that tests/test_docs_sessions.py runs, in the
  page's order, against a real API process;
- `<!-- sql-role: owner -->`, `<!-- sql-role: analyst -->` or `<!-- sql-role: role-admin -->`
  (who makes logins: the owner has no CREATEROLE): a `sql` block that
  tests/test_docs_sql.py runs as that role;
- `<!-- run by tests/<file>.py -->`: a block that test file runs with checks of its own (it gets
  the block from `run_by(__file__)`);
- `<!-- output -->`: what something prints or answers (a response, a figure, a diagram's
  text), shown, not run;
- `<!-- not run: <reason> -->`: a block that cannot run here, with the reason a reader sees.

tests/test_docs_inventory.py fails on a block without one of these."""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGES = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").rglob("*.md")),
    ROOT / "clients" / "python" / "README.md",
    ROOT / "clients" / "typescript" / "README.md",
    ROOT / "terraform" / "README.md",
    ROOT / "charts" / "cognis-memory" / "README.md",
]

FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
COMMENT = re.compile(r"^\s*<!--\s*(?P<text>.*?)\s*-->\s*$")
KINDS = {
    "session": re.compile(r"^session$"),
    "sql-role": re.compile(r"^sql-role: (?P<arg>owner|analyst|role-admin)$"),
    "run-by": re.compile(r"^run by (?P<arg>tests/[\w/]+\.py)$"),
    "output": re.compile(r"^output$"),
    "not-run": re.compile(r"^not run: (?P<arg>.+)$"),
}


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # of the opening fence, 1-based
    language: str
    marker: str | None  # the comment's text right above the fence, if any
    code: str

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    @property
    def kind(self) -> str | None:
        """session, sql-role, run-by, output or not-run; None for no or an unknown marker."""
        if self.marker is None:
            return None
        for kind, pattern in KINDS.items():
            if pattern.match(self.marker):
                return kind
        return None

    @property
    def argument(self) -> str:
        """The role, the test file or the reason the marker names ('' for the others)."""
        assert self.kind is not None and self.marker is not None, self.where
        found = KINDS[self.kind].match(self.marker)
        assert found is not None
        return found.groupdict().get("arg") or ""


def blocks(page: Path, text: str | None = None) -> list[Block]:
    """The page's fenced blocks in order (indented ones, in lists, too; dedented)."""
    lines = (page.read_text() if text is None else text).split("\n")
    found: list[Block] = []
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if not opening:
            index += 1
            continue
        fence, indent = opening["fence"], opening["indent"]
        closing = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$")
        end = index + 1
        while end < len(lines) and not closing.match(lines[end]):
            end += 1
        above = COMMENT.match(lines[index - 1]) if index else None
        body = "\n".join(line.removeprefix(indent) for line in lines[index + 1 : end])
        found.append(
            Block(
                page=page,
                line=index + 1,
                language=opening["info"].strip().split(" ")[0],
                marker=above["text"] if above else None,
                code=textwrap.dedent(body) + "\n",
            )
        )
        index = end + 1
    return found


def every_block() -> list[Block]:
    return [block for page in PAGES for block in blocks(page)]


def of_kind(kind: str, page: Path | None = None) -> list[Block]:
    return [block for block in (blocks(page) if page else every_block()) if block.kind == kind]


def run_by(test_file: str) -> list[Block]:
    """The blocks marked `<!-- run by tests/... -->` for this test file (its `__file__`)."""
    name = Path(test_file).resolve().relative_to(ROOT).as_posix()
    mine = [block for block in of_kind("run-by") if block.argument == name]
    assert mine, f"no block of the docs is marked <!-- run by {name} -->"
    return mine


def one_run_by(test_file: str, page: str, contains: str) -> str:
    """The code of the one block of `page` marked for this test file that holds `contains`."""
    (block,) = [
        block for block in run_by(test_file) if block.page == ROOT / page and contains in block.code
    ]
    return block.code
