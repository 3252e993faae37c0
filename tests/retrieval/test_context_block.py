"""The context block's pure part (app/retrieval/context_block.py): the token estimate, one line
per memory, the budget's cut in order, the templates."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime

from app.retrieval.context_block import ContextLine, Section, estimate_tokens, fit_block, render

AS_OF = datetime(2026, 12, 4, tzinfo=UTC)


def _line(section: Section, content: str, chain: uuid.UUID | None = None, **fields) -> ContextLine:
    return ContextLine(
        section=section,
        memory_id=uuid.uuid4(),
        chain_id=chain or uuid.uuid4(),
        content=content,
        category="personal_details",
        date=datetime(2023, 5, 8, tzinfo=UTC),
        **fields,
    )


def test_the_estimate_counts_ascii_by_four_and_other_characters_one_each() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("abcd") == 1
    assert estimate_tokens("abcde") == 2
    assert estimate_tokens("東京に住んでいます") == 9
    assert estimate_tokens("I live in Zürich") == 5  # 15 ASCII characters, 1 other


def test_a_memory_appears_once_in_its_first_section() -> None:
    chain = uuid.uuid4()
    lines = [
        _line("relevant", "I live in Nantes", chain, replaced="I live in Lyon"),
        _line("changes", "I live in Nantes", chain, replaced="I live in Lyon"),
        _line("profile", "I live in Nantes", chain),
    ]
    block = fit_block(lines, "text", 1000, AS_OF)
    assert [line.section for line in block.lines] == ["relevant"]
    assert block.text.count("Nantes") == 1
    assert "- [2023-05-08] (personal_details) I live in Nantes (changed from: I live in Lyon)" in (
        block.text
    )


def test_the_budget_keeps_the_first_lines_and_tries_shorter_ones_after_a_long_one() -> None:
    lines = [
        _line("relevant", "short one"),
        _line("relevant", "a long line " * 40),
        _line("profile", "short two"),
    ]
    budget = estimate_tokens(render([lines[0], lines[2]], "text", AS_OF))
    block = fit_block(lines, "text", budget, AS_OF)
    assert [line.content for line in block.lines] == ["short one", "short two"]
    assert block.truncated
    assert block.tokens == estimate_tokens(block.text) == budget
    smaller = fit_block(lines, "text", budget - 1, AS_OF)
    assert [line.content for line in smaller.lines] == ["short one"]
    nothing = fit_block(lines[1:2], "text", 40, AS_OF)
    assert (nothing.text, nothing.tokens, nothing.truncated) == ("", 0, True)


def test_templates() -> None:
    lines = [_line("changes", "I live in Nantes", replaced="I live in Lyon"), _line("profile", "x")]
    markdown = render(lines, "markdown", AS_OF)
    assert markdown.startswith("# What you know about the user (as of 2026-12-04)")
    assert "## Recent changes\n- **2023-05-08** (personal_details) I live in Nantes" in markdown
    document = json.loads(render(lines, "json", AS_OF))
    assert document == {
        "as_of": "2026-12-04",
        "changes": [
            {
                "date": "2023-05-08",
                "category": "personal_details",
                "content": "I live in Nantes",
                "replaced": "I live in Lyon",
            }
        ],
        "profile": [{"date": "2023-05-08", "category": "personal_details", "content": "x"}],
    }
    assert render([], "text", AS_OF) == ""
