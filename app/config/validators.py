"""Validators the settings groups share."""

from __future__ import annotations

from pydantic import ValidationInfo

from app import vocabulary


def within_published_bound(value: int, info: ValidationInfo) -> int:
    """The OpenAPI document publishes these bounds: a setting may lower one, never raise it."""
    bound = {
        "max_content_chars": vocabulary.MAX_CONTENT_CHARS,
        "max_batch_size": vocabulary.MAX_BATCH_ITEMS,
        "ingest_max_messages": vocabulary.MAX_BATCH_ITEMS,
        "max_top_k": vocabulary.MAX_TOP_K,
    }[str(info.field_name)]
    if not 1 <= value <= bound:
        raise ValueError(f"must lie in [1, {bound}] (the bound in app/vocabulary.py)")
    return value


def empty_is_unset(value: object) -> object:
    # Compose passes `${VAR:-}` as an empty string: an empty key must not become "Bearer ".
    return None if value == "" else value
