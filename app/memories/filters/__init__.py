"""The filter language of search and list (language.py: the tree, its parser and the scopes'
filters) and its two compilers: Postgres (sql.py, the exact guard) and OpenSearch
(opensearch.py, exact or a superset). Read language.py's docstring for the language itself."""

from __future__ import annotations

from app.memories.filters.language import (
    FIELDS,
    FILTER_JSON_SCHEMA,
    MAX_FILTER_DEPTH,
    OPERATORS,
    AllOf,
    AnyOf,
    Clause,
    Filter,
    Not,
    all_of,
    clauses,
    deletion_filter,
    listing_filter,
    owned_by,
    parse_filter,
    parse_filter_json,
    visible_to,
)
from app.memories.filters.opensearch import to_opensearch
from app.memories.filters.sql import to_sql

__all__ = [
    "FIELDS",
    "FILTER_JSON_SCHEMA",
    "MAX_FILTER_DEPTH",
    "OPERATORS",
    "AllOf",
    "AnyOf",
    "Clause",
    "Filter",
    "Not",
    "all_of",
    "clauses",
    "deletion_filter",
    "listing_filter",
    "owned_by",
    "parse_filter",
    "parse_filter_json",
    "to_opensearch",
    "to_sql",
    "visible_to",
]
