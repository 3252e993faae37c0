"""Stage 1: query analysis — temporal intent (a resolved time window), history intent, and
the question's parts (app/retrieval/query_parts.py)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from app.retrieval.query_parts import QueryParts, split_query
from app.time_expressions import TimeWindow, resolve_time_expressions

# Japanese: words for "before" and "at first", "before <verb>", the past progressive (住んでいた,
# 使ってた: a state that held), "no longer" (もう ... ない), change (変わった, 変更) and "what did I
# say". Japanese has no spaces: 前 counts only where it is not part of another word's kanji (名前,
# 午前, 駅前) nor after a count of time (3日前 is a time, not "before").
_NOT_BEFORE = "名午駅目手寸直日週月年間分秒数〇一二三四五六七八九十百"
JAPANESE_HISTORY = (
    r"以前|昔|かつて|元々|もともと|最初[はのに]|初めは|はじめは|これまで|今まで|前職|前回",
    rf"(?<![{_NOT_BEFORE}\d])前(?:は|に|の|まで)",
    r"(?<=[うくぐすつぬぶむる])前",  # 引っ越す前, 変わる前, 結婚する前
    r"[てで]い(?:た|ました)|[んっ][てで]た",  # 住んでいた, 使っていました, 飼ってた
    r"もう[^。\uff1f?\uff01!]{0,15}?(?:ない|ません|なくなっ)",
    r"変わっ|変わる前|変え[たる]|変更|変化|変遷|移り変わり",
    r"(?:何と|なんて|何て)言",
)

# Phrases that ask about earlier states of a memory, not just the current one.
HISTORY_PATTERNS = tuple(
    re.compile(p, re.IGNORECASE)
    for p in (
        r"\bused to\b",
        r"\bdid \w+ use to\b",
        r"\bbefore\b",
        r"\bpreviously\b",
        r"\bprevious\b",
        r"\bformerly\b",
        r"\boriginally\b",
        r"\bat first\b",
        r"\banymore\b",
        r"\bany more\b",
        r"\bno longer\b",
        r"\bchanged?\b",
        r"\bchanging\b",
        r"\bwhat did i (?:say|tell you|mention)\b",
        r"\bdid i (?:say|tell you|mention)\b",
        r"\bhistory of\b",
        r"\bover time\b",
        *JAPANESE_HISTORY,
    )
)


# Questions whose answer is a time: the memory that answers them usually names one.
WHEN_QUESTION = re.compile(
    r"^\s*(?:when\b|(?:in |on |at )?what (?:year|month|date|day|time|week)\b)"
    r"|\bhow long ago\b|\bsince when\b",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class QueryAnalysis:
    as_of: datetime
    window: TimeWindow | None
    history_terms: tuple[str, ...]
    asks_when: bool = False
    # The question's parts, from its syntax (of the text the legs search, once known).
    parts: QueryParts = field(default_factory=QueryParts)

    @property
    def temporal(self) -> bool:
        return self.window is not None

    @property
    def history(self) -> bool:
        return bool(self.history_terms)

    def explanation(self) -> dict[str, Any]:
        return {
            "as_of": self.as_of.isoformat(),
            "temporal_intent": self.temporal,
            "time_window": None
            if self.window is None
            else {
                "text": self.window.text,
                "start": self.window.start.isoformat(),
                "end": self.window.end.isoformat(),
                "granularity": self.window.granularity,
                "days": self.window.days,
            },
            "history_intent": self.history,
            "history_terms": list(self.history_terms),
            "asks_when": self.asks_when,
            "parts": list(self.parts.parts),
            "parts_kind": self.parts.kind,
            "asks_order": self.parts.asks_order,
            "asks_list": self.parts.asks_list,
        }


def analyze_query(query: str, as_of: datetime) -> QueryAnalysis:
    """Resolve the query's first time expression against `as_of`; find history phrases."""
    windows = resolve_time_expressions(query, as_of)
    terms = tuple(m.group(0).lower() for p in HISTORY_PATTERNS if (m := p.search(query)))
    return QueryAnalysis(
        as_of=as_of,
        window=windows[0] if windows else None,
        history_terms=terms,
        asks_when=WHEN_QUESTION.search(query) is not None,
        parts=split_query(query),
    )
