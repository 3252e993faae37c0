"""Word-level differences between two versions of a memory, for the chain timeline."""

from __future__ import annotations

import re
from dataclasses import dataclass
from difflib import SequenceMatcher
from typing import Any, Literal

_TOKEN = re.compile(r"\s+|[^\s]+")
# Fields besides the text whose change a version records.
TRACKED_FIELDS = ("category", "scope", "session_id", "speaker", "event_time", "event_end")


@dataclass(frozen=True, slots=True)
class Span:
    kind: Literal["same", "del", "ins"]
    text: str


def word_diff(old: str, new: str) -> list[Span]:
    """`new` against `old` as unchanged, deleted and inserted runs of words."""
    a, b = _TOKEN.findall(old), _TOKEN.findall(new)
    spans: list[Span] = []
    for tag, i1, i2, j1, j2 in SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if tag == "equal":
            spans.append(Span("same", "".join(a[i1:i2])))
            continue
        if i2 > i1:
            spans.append(Span("del", "".join(a[i1:i2])))
        if j2 > j1:
            spans.append(Span("ins", "".join(b[j1:j2])))
    return spans


def field_changes(old: Any, new: Any) -> list[tuple[str, Any, Any]]:
    """(field, before, after) for each tracked field that differs between two versions."""
    # getattr with a default: a server before 0016 sends no event_end.
    return [
        (name, getattr(old, name, None), getattr(new, name, None))
        for name in TRACKED_FIELDS
        if getattr(old, name, None) != getattr(new, name, None)
    ]
