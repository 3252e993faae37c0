"""The LLM's answer is untrusted input: parse it strictly into operations, or say why not.

Rejected: non-JSON, a shape other than {"operations": [...]}, an unknown operation, a target
that is not one of the candidates shown, an invented category, a DELETE without a reason, a
missing required field, content that repeats the instructions, two operations on one memory.
Unknown extra keys are ignored (local models add commentary fields); they never carry meaning.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from app.ingest.domain import Candidate, MessageContext, Operation
from app.ingest.prompt import INSTRUCTIONS
from app.memories.categories import unknown_category_detail
from app.time_expressions import as_aware
from app.vocabulary import OPERATIONS, SCOPES

MAX_OPERATIONS = 20
# Content sharing a run of this many words with the instructions is the prompt, not a fact.
ECHO_SHINGLE_WORDS = 6
_FENCE = re.compile(r"^\s*```(?:json)?\s*(?P<body>.*?)\s*```\s*$", re.DOTALL)
_WORD = re.compile(r"[a-z0-9]+")


class InvalidAnswer(ValueError):
    """Why an answer was rejected; fed back to the LLM on the retry and kept in the audit log."""


def _shingles(text: str, n: int = ECHO_SHINGLE_WORDS) -> set[tuple[str, ...]]:
    words = _WORD.findall(text.lower())
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


_INSTRUCTION_SHINGLES = _shingles(INSTRUCTIONS)
_PROMPT_MARKERS = ("existing memories:", "new message:", "<<<", ">>>", "message time:")


def repeats_prompt(content: str, message: str) -> bool:
    """True when content copies the instructions or the prompt's scaffolding (and the user's own
    message did not say the same thing)."""
    lowered = content.lower()
    if any(marker in lowered and marker not in message.lower() for marker in _PROMPT_MARKERS):
        return True
    copied = _shingles(content) & _INSTRUCTION_SHINGLES
    return bool(copied - _shingles(message))


def _text(item: dict[str, Any], key: str, where: str, required: bool) -> str | None:
    value = item.get(key)
    if value is None or (isinstance(value, str) and not value.strip()):
        if required:
            raise InvalidAnswer(f"{where}: '{key}' is required")
        return None
    if not isinstance(value, str):
        raise InvalidAnswer(f"{where}: '{key}' must be a string")
    return value.strip()


def _event_time(raw: str | None, where: str) -> datetime | None:
    if raw is None:
        return None
    try:
        return as_aware(datetime.fromisoformat(raw))
    except ValueError as exc:
        raise InvalidAnswer(f"{where}: event_time {raw[:40]!r} is not an ISO 8601 date") from exc


class AnswerGuard:
    def __init__(
        self,
        context: MessageContext,
        candidates: Iterable[Candidate],
        categories: tuple[str, ...],
        max_content_chars: int,
    ) -> None:
        self._context = context
        # A target may be named by its reference (m1) or by the memory id shown behind it.
        self._shown: dict[str, Candidate] = {}
        for candidate in candidates:
            self._shown[candidate.ref] = candidate
            self._shown[str(candidate.memory_id)] = candidate
        self._categories = categories
        self._max_chars = max_content_chars

    def parse(self, raw: str) -> list[Operation]:
        match = _FENCE.match(raw)
        try:
            answer = json.loads(match.group("body") if match else raw)
        except ValueError as exc:
            raise InvalidAnswer(f"not valid JSON: {exc}") from exc
        if not isinstance(answer, dict) or not isinstance(answer.get("operations"), list):
            raise InvalidAnswer('expected an object {"operations": [...]}')
        items = answer["operations"]
        if len(items) > MAX_OPERATIONS:
            raise InvalidAnswer(f"{len(items)} operations; at most {MAX_OPERATIONS} are allowed")
        operations = [self._operation(item, f"operations[{i}]") for i, item in enumerate(items)]
        targets = [op.target.memory_id for op in operations if op.target is not None]
        if len(targets) != len(set(targets)):
            raise InvalidAnswer("two operations name the same target")
        return operations

    def _operation(self, item: Any, where: str) -> Operation:
        if not isinstance(item, dict):
            raise InvalidAnswer(f"{where}: expected an object")
        op = _text(item, "op", where, required=True)
        assert op is not None
        op = op.upper()
        if op not in OPERATIONS:
            raise InvalidAnswer(f"{where}: unknown op {op[:20]!r}; expected one of {OPERATIONS}")
        target = self._target(item, where, required=op in ("UPDATE", "DELETE"))
        content = _text(item, "content", where, required=op in ("ADD", "UPDATE"))
        if content is not None and op in ("ADD", "UPDATE"):
            self._check_content(content, where)
        category = _text(item, "category", where, required=op == "ADD")
        if category is not None and category not in self._categories:
            raise InvalidAnswer(f"{where}: {unknown_category_detail(category, self._categories)}")
        reason = _text(item, "reason", where, required=op == "DELETE")
        scope = (_text(item, "scope", where, required=False) or "USER").upper()
        if scope not in SCOPES:
            raise InvalidAnswer(f"{where}: scope must be USER or CONTEXT")
        if scope == "CONTEXT" and not self._context.session_id:
            raise InvalidAnswer(f"{where}: CONTEXT scope needs a session, and the message has none")
        return Operation(
            op=op,
            content=content if op in ("ADD", "UPDATE") else None,
            category=category if op in ("ADD", "UPDATE") else None,
            scope=self._context.scope or scope,
            target=target,
            reason=reason,
            event_time=_event_time(_text(item, "event_time", where, required=False), where),
        )

    def _target(self, item: dict[str, Any], where: str, required: bool) -> Candidate | None:
        ref = _text(item, "target", where, required=required)
        if ref is None:
            return None
        # Small models write "M1" or "[m1]" for m1.
        candidate = self._shown.get(ref.strip("[]")) or self._shown.get(ref.strip("[]").lower())
        if candidate is None:
            raise InvalidAnswer(f"{where}: target {ref[:40]!r} is not one of the memories shown")
        return candidate

    def _check_content(self, content: str, where: str) -> None:
        if "\x00" in content:
            raise InvalidAnswer(f"{where}: content contains a NUL character")
        if len(content) > self._max_chars:
            raise InvalidAnswer(f"{where}: content longer than {self._max_chars} characters")
        if repeats_prompt(content, self._context.content):
            raise InvalidAnswer(f"{where}: content repeats the instructions, not a fact")
