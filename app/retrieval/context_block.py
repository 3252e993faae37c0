"""The context block an agent puts in its prompt: dated lines in three sections, most useful
first (what the query found, then what changed, then the user's stable facts), each memory once,
cut to a token budget. Plain data in, text out: no database here (app/retrieval/context.py
gathers the lines).

Tokens are estimated, not counted with a tokenizer: the embedding model may run in another
process (the model service), and the block goes to whatever LLM the agent uses, whose tokenizer
differs anyway. The estimate is one token per 4 ASCII characters (rounded up) plus one per
other character (a CJK character is one token or more in the usual BPE and WordPiece
vocabularies), which errs on the long side for English and Japanese alike."""

from __future__ import annotations

import json
import math
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

Section = Literal["relevant", "changes", "profile"]
Template = Literal["text", "markdown", "json"]
SECTIONS: tuple[Section, ...] = ("relevant", "changes", "profile")

_TITLES: dict[Section, str] = {
    "relevant": "Relevant to the request",
    "changes": "Recent changes",
    "profile": "About the user",
}


def estimate_tokens(text: str) -> int:
    """The block's stated approximation of a token count (module docstring)."""
    ascii_chars = sum(1 for c in text if c.isascii())
    return math.ceil(ascii_chars / 4) + (len(text) - ascii_chars)


@dataclass(frozen=True, slots=True)
class ContextLine:
    """One memory as the block states it."""

    section: Section
    memory_id: uuid.UUID
    chain_id: uuid.UUID
    content: str
    category: str
    date: datetime  # when the fact began (or, for a change, when it changed)
    replaced: str | None = None  # the content of the version this one replaced
    replaced_id: uuid.UUID | None = None
    # A newer current memory that contradicts this one (app/retrieval/disagreement.py): its
    # content and id. The line is stated as earlier, after the newer one.
    later: str | None = None
    later_id: uuid.UUID | None = None


@dataclass(frozen=True, slots=True)
class ContextBlock:
    text: str
    lines: list[ContextLine]  # those the text states, in its order
    tokens: int
    truncated: bool  # a line was left out for the budget


def _day(moment: datetime) -> str:
    return moment.date().isoformat()


def _statement(line: ContextLine) -> str:
    statement = line.content
    if line.replaced is not None:
        statement += f" (changed from: {line.replaced})"
    if line.later is not None:
        statement += f" (earlier; later: {line.later})"
    return statement


def _json_line(line: ContextLine) -> dict[str, str]:
    stated = {"date": _day(line.date), "category": line.category, "content": line.content}
    if line.replaced is not None:
        stated["replaced"] = line.replaced
    if line.later is not None:
        stated["earlier_than"] = line.later
    return stated


def render(lines: list[ContextLine], template: Template, as_of: datetime) -> str:
    """The block stating `lines` (already in their order); empty when there are none."""
    if not lines:
        return ""
    by_section = {s: [line for line in lines if line.section == s] for s in SECTIONS}
    if template == "json":
        document: dict[str, object] = {"as_of": _day(as_of)}
        for section, chosen in by_section.items():
            if chosen:
                document[section] = [_json_line(line) for line in chosen]
        return json.dumps(document, ensure_ascii=False, separators=(",", ":"))
    parts = []
    for section, chosen in by_section.items():
        if not chosen:
            continue
        if template == "markdown":
            parts.append(f"## {_TITLES[section]}")
            parts.extend(f"- **{_day(li.date)}** ({li.category}) {_statement(li)}" for li in chosen)
        else:
            parts.append(f"{_TITLES[section]}:")
            parts.extend(f"- [{_day(li.date)}] ({li.category}) {_statement(li)}" for li in chosen)
        parts.append("")
    header = (
        f"# What you know about the user (as of {_day(as_of)})"
        if template == "markdown"
        else f"What you know about the user (as of {_day(as_of)}):"
    )
    return "\n".join([header, "", *parts]).rstrip() + "\n"


def fit_block(
    candidates: list[ContextLine], template: Template, max_tokens: int, as_of: datetime
) -> ContextBlock:
    """The block of the first `candidates` that fit in `max_tokens`, each chain once (its
    first, most useful, line). A line that does not fit is left out and the next ones are
    still tried, so a long line does not crowd out shorter ones below it."""
    chosen: list[ContextLine] = []
    seen: set[uuid.UUID] = set()
    truncated = False
    text, tokens = "", 0
    for line in candidates:
        if line.chain_id in seen:
            continue
        seen.add(line.chain_id)
        trial = render([*chosen, line], template, as_of)
        trial_tokens = estimate_tokens(trial)
        if trial_tokens > max_tokens:
            truncated = True
            continue
        chosen.append(line)
        text, tokens = trial, trial_tokens
    return ContextBlock(text=text, lines=chosen, tokens=tokens, truncated=truncated)
