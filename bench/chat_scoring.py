"""What bench/chat.py counts, as plain functions of what the API answered (no service here, so
the rules are tested on their own: tests/bench/test_chat_scoring.py).

A fact is named by substrings, not ids: a question's `current` alternatives identify the
memory that states the fact as it is now, `replaced` the one it changed, whatever the
service made of the user's turn (one memory a message, one a fact, a speaker prefixed).
Matching ignores case.

**Marked earlier.** The service may keep a replaced fact current and mark it as earlier than
the one that disagrees with it, or show it as the history of its memory. A search hit counts
as marked when it is history (`history_of`), superseded (`superseded`, or its memory not
`is_current`), or carries any of EARLIER_FIELDS set (on the hit or on its memory), or a
`status` among EARLIER_STATUSES: the name of that field was not settled when the bench was
written, so every likely one counts.

**Replaced above current.** A question's replaced fact ranks above its current one when a
hit that states the replaced fact (and not the current one), and is not marked earlier, comes
before the first unmarked hit that states the current fact, or when the current fact is not
among the results at all.

**Context block right.** The block (plain-text template) holds the current fact on a line
where no EARLIER_MARKERS word precedes it, and every place the replaced fact appears is
preceded, on its own line, by one of those words (the service's `(changed from: ...)`, or a
line saying earlier, previously, used to, ...); a replaced fact absent from the block is right
too.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DATA = Path(__file__).parent / "data" / "chat"
SPLITS = ("dev", "heldout")

EARLIER_FIELDS = (
    "earlier",
    "is_earlier",
    "marked_earlier",
    "earlier_than",
    "superseded_by",
    "replaced_by",
    "contradicted_by",
    "newer_id",
)
EARLIER_STATUSES = {"earlier", "replaced", "superseded", "previous", "outdated"}
EARLIER_MARKERS = (
    "changed from",
    "earlier",
    "previous",
    "replaced",
    "superseded",
    "used to",
    "formerly",
    "no longer",
    "outdated",
    "was:",
)


def mentions(text: str, needles: Iterable[str]) -> bool:
    """Whether `text` holds any of `needles`, ignoring case."""
    lowered = text.lower()
    return any(needle.lower() in lowered for needle in needles)


# ----------------------------------------------------------------------------- data


@dataclass(frozen=True)
class Question:
    question: str
    current: tuple[str, ...]
    replaced: tuple[str, ...] = ()


@dataclass(frozen=True)
class ChatUser:
    name: str
    split: str
    turns: list[dict[str, str]]  # {"content", "timestamp"} in the order said
    questions: list[Question]


@dataclass(frozen=True)
class UpdateCase:
    name: str
    split: str
    earlier: list[str]  # messages sent first, each one turn (several facts in one allowed)
    message: str  # the chat-style message that changes one of them, or adds beside them
    supersedes: str | None  # the earlier fact it changes; None: an addition
    keep: tuple[str, ...]  # the other earlier facts: they must stay current


def _check_user(user: ChatUser) -> None:
    """The data's own rules, so a scoring rule never rests on a badly written question: each
    needle is said in some turn, no turn says both a current and a replaced one, and the
    replaced fact is said before the current one."""
    if not 6 <= len(user.turns) <= 12:
        raise ValueError(f"{user.name}: {len(user.turns)} turns, not 6-12")
    texts = [t["content"] for t in user.turns]
    for q in user.questions:
        saying_current = [i for i, t in enumerate(texts) if mentions(t, q.current)]
        if not saying_current:
            raise ValueError(f"{user.name}: no turn says {q.current}")
        if not q.replaced:
            continue
        saying_replaced = [i for i, t in enumerate(texts) if mentions(t, q.replaced)]
        if not saying_replaced:
            raise ValueError(f"{user.name}: no turn says {q.replaced}")
        if set(saying_current) & set(saying_replaced):
            raise ValueError(f"{user.name}: a turn says both {q.current} and {q.replaced}")
        if max(saying_replaced) > min(saying_current):
            raise ValueError(f"{user.name}: {q.replaced} is said after {q.current}")


def _rows(path: Path) -> list[dict[str, Any]]:
    """A JSON-lines file's rows."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def load_chat_users(split: str, data: Path = DATA) -> list[ChatUser]:
    users = []
    for row in _rows(data / f"{split}.jsonl"):
        questions = [
            Question(q["question"], tuple(q["current"]), tuple(q.get("replaced", ())))
            for q in row["questions"]
        ]
        user = ChatUser(row["user"], row["split"], row["turns"], questions)
        _check_user(user)
        users.append(user)
    return users


def _check_case(case: UpdateCase) -> None:
    """Each fact is said in an earlier message and not in the new one, so whether it is still
    current can be read from the contents alone."""
    for needle in (*([case.supersedes] if case.supersedes else []), *case.keep):
        if not any(mentions(m, [needle]) for m in case.earlier):
            raise ValueError(f"{case.name}: no earlier message says {needle!r}")
        if mentions(case.message, [needle]):
            raise ValueError(f"{case.name}: the new message says {needle!r} too")


def load_update_cases(split: str, data: Path = DATA) -> list[UpdateCase]:
    cases = []
    for row in _rows(data / f"updates_{split}.jsonl"):
        case = UpdateCase(
            row["case"],
            row["split"],
            row["earlier"],
            row["message"],
            row["supersedes"],
            tuple(row["keep"]),
        )
        _check_case(case)
        cases.append(case)
    return cases


# ----------------------------------------------------------------------------- search


def marked_earlier(hit: dict[str, Any]) -> bool:
    """Whether a search hit is shown as an earlier state (module docstring)."""
    memory = hit.get("memory") or {}
    if hit.get("history_of") is not None or hit.get("superseded") is True:
        return True
    if memory.get("is_current") is False:
        return True
    for holder in (hit, memory):
        if any(holder.get(name) for name in EARLIER_FIELDS):
            return True
        if str(holder.get("status", "")).lower() in EARLIER_STATUSES:
            return True
    return False


@dataclass(frozen=True)
class SearchScore:
    hit1: bool
    hit3: bool
    replaced_above: bool | None  # None: the question's fact never changed


def score_search(hits: Sequence[dict[str, Any]], question: Question) -> SearchScore:
    """One question's ranked hits (history entries included or not): hit@1 and hit@3 count
    an unmarked hit stating the current fact; `replaced_above` as the module says."""
    ranked = [h for h in hits if h.get("history_of") is None]
    current_at = [
        i
        for i, h in enumerate(ranked)
        if mentions(h["memory"]["content"], question.current) and not marked_earlier(h)
    ]
    first_current = current_at[0] if current_at else len(ranked)
    replaced_above: bool | None = None
    if question.replaced:
        replaced_above = any(
            mentions(h["memory"]["content"], question.replaced)
            and not mentions(h["memory"]["content"], question.current)
            and not marked_earlier(h)
            for h in ranked[:first_current]
        )
    return SearchScore(first_current == 0, first_current < 3, replaced_above)


# ----------------------------------------------------------------------------- context


def _occurrences(line: str, needle: str) -> list[int]:
    return [m.start() for m in re.finditer(re.escape(needle.lower()), line.lower())]


def _after_marker(line: str, at: int) -> bool:
    before = line[:at].lower()
    return any(marker in before for marker in EARLIER_MARKERS)


def context_right(block: str, question: Question) -> bool:
    """Whether the block states the current fact and the replaced one only as replaced."""
    lines = block.splitlines()
    holds_current = any(
        not _after_marker(line, at)
        for line in lines
        for needle in question.current
        for at in _occurrences(line, needle)
    )
    replaced_unmarked = any(
        not _after_marker(line, at)
        for line in lines
        for needle in question.replaced
        for at in _occurrences(line, needle)
    )
    return holds_current and not replaced_unmarked


# ----------------------------------------------------------------------------- updates


@dataclass(frozen=True)
class UpdateScore:
    expected: bool  # the case changes an earlier fact
    superseded: bool  # and that fact is no longer current after the message
    ended: int  # earlier memory versions no longer current after the message
    ended_right: int  # of those, the ones stating the fact the case changes
    kept_lost: list[str] = field(default_factory=list)  # unrelated facts no longer current


def score_update(
    case: UpdateCase, before: Sequence[dict[str, Any]], after: Sequence[dict[str, Any]]
) -> UpdateScore:
    """One case from the user's current memories just before and just after its message."""
    now = {m["version_id"] for m in after}
    ended = [m for m in before if m["version_id"] not in now]
    contents_after = [m["content"] for m in after]
    still = lambda needle: any(mentions(c, [needle]) for c in contents_after)  # noqa: E731
    right = sum(mentions(m["content"], [case.supersedes]) for m in ended) if case.supersedes else 0
    return UpdateScore(
        expected=case.supersedes is not None,
        superseded=case.supersedes is not None and not still(case.supersedes),
        ended=len(ended),
        ended_right=right,
        kept_lost=[needle for needle in case.keep if not still(needle)],
    )


@dataclass
class UpdateTally:
    cases: int = 0
    expected: int = 0
    superseded: int = 0
    ended: int = 0
    ended_right: int = 0
    kept_lost: int = 0
    cases_losing: int = 0

    def add(self, score: UpdateScore) -> None:
        self.cases += 1
        self.expected += score.expected
        self.superseded += score.superseded
        self.ended += score.ended
        self.ended_right += score.ended_right
        self.kept_lost += len(score.kept_lost)
        self.cases_losing += bool(score.kept_lost)

    @property
    def recall(self) -> float:
        return self.superseded / self.expected if self.expected else 0.0

    @property
    def precision(self) -> float | None:
        return self.ended_right / self.ended if self.ended else None


@dataclass
class ChatTally:
    questions: int = 0
    hit1: int = 0
    hit3: int = 0
    changed: int = 0  # questions whose fact changed
    replaced_above: int = 0
    contexts: int = 0
    contexts_right: int = 0

    def add(self, score: SearchScore) -> None:
        self.questions += 1
        self.hit1 += score.hit1
        self.hit3 += score.hit3
        if score.replaced_above is not None:
            self.changed += 1
            self.replaced_above += score.replaced_above

    def add_context(self, right: bool) -> None:
        self.contexts += 1
        self.contexts_right += right
