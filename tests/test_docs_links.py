"""Every relative link of the README and docs/ names a file that exists, and an anchor a
heading of it (the README points into docs/ for everything past its first screen)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.doc_blocks import PAGES, ROOT

LINK = re.compile(r"\]\(([^)\s]+)\)")


def anchors(page: Path) -> set[str]:
    """GitHub's anchors of a page's headings: lower case, punctuation dropped, spaces to -."""
    headings = re.findall(r"^#{1,6} (.*)$", page.read_text(), re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def relative_links(page: Path) -> list[str]:
    prose = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)  # code blocks link nothing
    return [link for link in LINK.findall(prose) if not re.match(r"^[a-z]+:", link)]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for link in relative_links(page):
        path, _, anchor = link.partition("#")
        target = (page.parent / path).resolve() if path else page
        if not target.exists():
            broken.append(f"{link}: no such file")
        elif anchor and target.suffix == ".md" and anchor not in anchors(target):
            broken.append(f"{link}: no heading with that anchor")
    assert not broken, broken


def test_the_checker_sees_a_broken_link(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# Title\n\n[ok](#title) [gone](missing.md) [bad](#nowhere)\n")
    assert relative_links(page) == ["#title", "missing.md", "#nowhere"]
    assert anchors(page) == {"title"}
