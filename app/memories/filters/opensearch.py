"""The filter language compiled for OpenSearch: one `bool.filter` clause, exact where the index
answers exactly, else a superset Postgres narrows (app/memories/filters/language.py)."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from app.memories.filters.language import FIELDS, AllOf, AnyOf, Clause, Filter, Not, clauses
from app.search_index.documents import MAX_INDEXED_METADATA_CHARS


def to_opensearch(tree: Filter) -> dict[str, Any] | None:
    """The filter as one query DSL clause for `bool.filter`: exact where the index can answer
    exactly, else a superset (Postgres re-checks every candidate). None: match everything."""
    return _os(tree)


def _os(tree: Filter) -> dict[str, Any] | None:
    if isinstance(tree, AllOf):
        kept = [clause for child in tree.filters if (clause := _os(child)) is not None]
        return {"bool": {"filter": kept}} if kept else None
    if isinstance(tree, AnyOf):
        compiled = [_os(child) for child in tree.filters]
        if any(clause is None for clause in compiled):
            return None  # one branch matches "anything": so does the whole
        return {"bool": {"should": compiled, "minimum_should_match": 1}}
    if isinstance(tree, Not):
        # Negating a superset is not a superset: only an exact child may be negated.
        inner = _os(tree.filter) if _exact_in_index(tree.filter) else None
        return {"bool": {"must_not": [inner]}} if inner is not None else None
    return _os_clause(tree)


def _exact_in_index(tree: Filter) -> bool:
    return all(_os_exact(clause) for clause in clauses(tree))


def _os_exact(clause: Clause) -> bool:
    """Whether the index answers the clause exactly (so it may be negated there too): every
    column field does. A metadata clause does not: flat_object keeps the text of every leaf
    (2 and "2" look alike, an array matches each of its elements, a JSON null is absent, a
    long string is not indexed), so it is at best a superset there."""
    return clause.metadata_path is None and FIELDS[clause.field].kind != "entity"


def _os_clause(clause: Clause) -> dict[str, Any] | None:
    op, value = clause.op, clause.value
    if clause.metadata_path is not None:
        values = value if op == "in" else (value,)
        pushable = op in ("eq", "in") and all(
            isinstance(v, str) and len(v) <= MAX_INDEXED_METADATA_CHARS for v in values
        )
        if not pushable:
            return None
        return {"terms": {clause.field: list(values)}}
    if FIELDS[clause.field].kind == "entity":
        return None  # memory_entities is in Postgres only: it re-checks every candidate
    document = FIELDS[clause.field].document
    exists = {"exists": {"field": document}}
    if op == "exists":
        return exists if value else {"bool": {"must_not": [exists]}}
    if isinstance(value, datetime):
        value = value.isoformat()
    if op == "eq":
        return {"term": {document: value}}
    if op == "ne":
        return {"bool": {"must_not": [{"term": {document: value}}]}}
    if op == "in":
        return {"terms": {document: list(value)}}
    if op == "nin":
        return {"bool": {"must_not": [{"terms": {document: list(value)}}]}}
    if op == "contains":
        return {"wildcard": {document: {"value": f"*{_wildcard_escape(value)}*"}}}
    return {"range": {document: {op: value}}}


def _wildcard_escape(value: str) -> str:
    return re.sub(r"([*?\\])", r"\\\1", value)
