"""Which way a bare point of a cycle points: back (the default) or forward.

"I went to Lisbon in May" said in December is last May; "we're expecting a second child in May"
said in December is next May. The resolver's past bias (see the package) is right for reports
of what happened, wrong for plans, so a clause that speaks of the future ("will", "going to",
"planning", "expecting", "next" ...) and not of the past ("was", "did", "ago" ...) turns the
bare points it names ("in May", "Friday", "May 8th", "on the 8th", "in summer") forward: the
next occurrence, the current one included while it lasts. Expressions that say their own
direction ("last May", "next Friday", "3 days ago", "yesterday", a year) are left as they are.

The clause is the text between sentence stops and "and"/"but" (not commas: "In May, we'll
move" is one clause), so "I moved here in March and we're expecting a child in May" dates
March back and May forward. English only: a
Japanese plan names its direction itself (来年の5月, 来週の金曜日).
"""

from __future__ import annotations

import re

_A = "['\u2019]"  # an apostrophe, straight or typographic
_CLAUSE_BREAK = re.compile(r"[.!?;\n]|\b(?:and|but|though|although|whereas)\b", re.IGNORECASE)

_FUTURE = re.compile(
    rf"\b(?:will|shall|won{_A}t|{_A}ll|going\s+to|gonna|about\s+to|plan|plans|planning|"
    rf"expect|expects|expecting|due|hope\s+to|hoping\s+to|intend|intends|intending|"
    rf"want\s+to|wants\s+to|wanna|would\s+like\s+to|{_A}d\s+like\s+to|looking\s+forward|"
    rf"upcoming|scheduled|booked|next|soon|thinking\s+(?:of|about))\b",
    re.IGNORECASE,
)
_PAST = re.compile(
    rf"\b(?:was|were|had|did|didn{_A}t|went|used\s+to|ago|last|yesterday|previously|"
    r"earlier|already)\b",
    re.IGNORECASE,
)


def clause_at(text: str, position: int) -> str:
    """The clause of `text` holding the character at `position`."""
    start = 0
    for stop in _CLAUSE_BREAK.finditer(text, 0, position):
        start = stop.end()
    after = _CLAUSE_BREAK.search(text, position)
    return text[start : after.start() if after else len(text)]


def points_forward(text: str, position: int) -> bool:
    """Whether the clause at `position` speaks of the future (and not also of the past)."""
    clause = clause_at(text, position)
    return _FUTURE.search(clause) is not None and _PAST.search(clause) is None
