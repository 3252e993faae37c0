"""The text part of a BM25 query: which analyses of content and context a query searches,
by its language, and with what weights (docs/languages.md)."""

from __future__ import annotations

from typing import Any

from app.search_index.documents import SUBFIELD_ANALYZERS, SUBFIELD_OF_LANGUAGE

# A Japanese, Chinese or Korean query searches its language's analysis of the text at full
# weight and the other CJK analysis at this share (a kanji-only Japanese query is often taken
# for Chinese; a mixed user's memory may be labelled either). Not the default analysis: it
# reads CJK text as single characters, and every memory sharing one character with the query
# would join the BM25 list and gain fused score (bench/japanese_bm25.py: 2.0 such matches a
# query, none without it). Latin words in a CJK query are matched all the same: both
# analyses keep them as words. Any other query searches the default analysis alone, as
# before languages had fields.
OTHER_LANGUAGE_WEIGHT = 0.3


def language_fields(language: str | None) -> dict[str, float]:
    """The text fields a query in `language` searches (content's; context's are alike), with
    their weights."""
    own = SUBFIELD_OF_LANGUAGE.get(language or "")
    if own is None:
        return {"content": 1.0}
    others = [f"content.{sub}" for sub in SUBFIELD_ANALYZERS if sub != own]
    return {f"content.{own}": 1.0, **dict.fromkeys(others, OTHER_LANGUAGE_WEIGHT)}


def _weighted_fields(language: str | None, context_boost: float) -> dict[str, float]:
    fields = language_fields(language)
    if context_boost > 0:
        fields |= {
            name.replace("content", "context", 1): weight * context_boost
            for name, weight in fields.items()
        }
    return fields


def proximity_match(
    query: str, context_boost: float, slop: int, language: str | None = None
) -> list[dict[str, Any]]:
    """Extra score for documents whose content (or context) has the query's terms close
    together, in any order: a phrase match allowing `slop` moves, in the query language's
    own analysis (a phrase of single characters would favour look-alikes)."""
    own = SUBFIELD_OF_LANGUAGE.get(language or "")
    fields = {
        name: weight
        for name, weight in _weighted_fields(language, context_boost).items()
        if name.endswith(f".{own}") or own is None
    }
    return [
        {"match_phrase": {field: {"query": query, "slop": slop, "boost": boost}}}
        for field, boost in fields.items()
    ]


def text_match(query: str, context_boost: float, language: str | None = None) -> dict[str, Any]:
    fields = _weighted_fields(language, context_boost)
    if fields == {"content": 1.0}:
        return {"match": {"content": {"query": query}}}
    return {
        "multi_match": {
            "query": query,
            "fields": [
                name if weight == 1.0 else f"{name}^{weight:g}" for name, weight in fields.items()
            ],
            "type": "best_fields",
            "tie_breaker": 0.3,
        }
    }
