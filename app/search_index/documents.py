"""The OpenSearch document for one memory version, and the index mapping."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from app.db.models import Memory

# Longer metadata strings are left out of the index's copy: a keyword term has at most
# 32,766 UTF-8 bytes, and one too long fails the whole document. Filters on longer values
# are answered by Postgres alone (app/memories/filters/).
MAX_INDEXED_METADATA_CHARS = 1024


def indexed_metadata(value: Any) -> Any:
    """The metadata as the index holds it: strings over MAX_INDEXED_METADATA_CHARS dropped."""
    if isinstance(value, dict):
        return {
            key: indexed_metadata(item)
            for key, item in value.items()
            if not (isinstance(item, str) and len(item) > MAX_INDEXED_METADATA_CHARS)
        }
    if isinstance(value, list):
        return [
            indexed_metadata(item)
            for item in value
            if not (isinstance(item, str) and len(item) > MAX_INDEXED_METADATA_CHARS)
        ]
    return value


def memory_document(memory: Memory) -> dict[str, Any]:
    """Snapshot of the fields BM25 search filters and returns; `_id` is the memory id."""
    return {
        "user_id": memory.user_id,
        "chain_id": str(memory.chain_id),
        "content": memory.content,
        "context": memory.context,
        "category": memory.category,
        "scope": memory.scope,
        "session_id": memory.session_id,
        "agent_id": memory.agent_id,
        "run_id": memory.run_id,
        "is_current": memory.is_current,
        "speaker": memory.speaker,
        "event_time": memory.event_time.isoformat() if memory.event_time else None,
        "created_at": memory.created_at.isoformat() if memory.created_at else None,
        "superseded_at": memory.superseded_at.isoformat() if memory.superseded_at else None,
        # So the BM25 leg drops an expired memory before ranking (filters.UNEXPIRED_DOCUMENTS).
        "expires_at": memory.expires_at.isoformat() if memory.expires_at else None,
        # For filters on metadata paths (app/memories/filters/): a flat_object.
        "metadata": indexed_metadata(memory.metadata_ or {}),
        "language": memory.language,
    }


def with_tenant(document: dict[str, Any], tenant_id: uuid.UUID) -> dict[str, Any]:
    """The document as indexed: with its tenant, taken from the outbox row (which got it in the
    memory's own transaction), so every query can filter on it."""
    return {**document, "tenant_id": str(tenant_id)}


@dataclass(frozen=True, slots=True)
class Analysis:
    """The analyzers the cluster offers, as probed when the index is made (client.py)."""

    english: bool  # `english` (stemming): the analysis-common module
    kuromoji: bool  # `kuromoji`: cognis-analysis-ja, or OpenSearch's analysis-kuromoji
    cjk: bool  # `cjk` (bigrams): analysis-common


# BM25 per language (issue 40). Japanese is read by kuromoji (words, verbs in their dictionary
# form, particles dropped), Chinese and Korean by the `cjk` analyzer's bigrams; every other
# language keeps the default analysis. Multi-fields of content and context: every document is
# analysed each way, so a mixed user's memory is found whatever language it was labelled.
SUBFIELD_OF_LANGUAGE = {"ja": "ja", "zh": "cjk", "ko": "cjk"}
SUBFIELD_ANALYZERS = {"ja": "memory_text_ja", "cjk": "memory_text_cjk"}
TEXT_FIELDS = ("content", "context")


def analyzers(analysis: Analysis) -> dict[str, dict[str, Any]]:
    """The index's analyzers: without kuromoji Japanese falls back on bigrams, without
    analysis-common everything on `standard`."""
    default: dict[str, Any] = (
        {"type": "english"} if analysis.english else {"type": "standard", "stopwords": "_english_"}
    )
    cjk: dict[str, Any] = {"type": "cjk"} if analysis.cjk else {"type": "standard"}
    return {
        "memory_text": default,
        "memory_text_ja": {"type": "kuromoji"} if analysis.kuromoji else cjk,
        "memory_text_cjk": cjk,
    }


def text_field() -> dict[str, Any]:
    """The mapping of content and context: the default analysis, and one subfield per
    analysis of SUBFIELD_ANALYZERS."""
    return {
        "type": "text",
        "analyzer": "memory_text",
        "fields": {
            sub: {"type": "text", "analyzer": analyzer}
            for sub, analyzer in SUBFIELD_ANALYZERS.items()
        },
    }


def added_fields(analysis: Analysis) -> dict[str, Any]:
    """Fields later versions added to the mapping: put into an older index on start-up."""
    properties = index_body(analysis)["mappings"]["properties"]
    added = {name: properties[name] for name in ADDED_FIELDS}
    # Without its language subfields: their analyzers may be missing (merged, not replaced,
    # where they are there).
    added["context"] = {"type": "text", "analyzer": "memory_text"}
    return {"properties": added}


# Fields added to the mapping after the first release, in order: an older index gets them on
# start-up, and its documents get their values at `make reindex` (until then a filter on them
# treats those documents as missing the field). The language subfields of content and context
# need analyzers an open index cannot gain: `make reindex` adds them (client.py,
# MemoryIndex.add_language_fields).
ADDED_FIELDS = ("context", "tenant_id", "metadata", "expires_at", "agent_id", "run_id", "language")


def index_body(
    analysis: Analysis, refresh_interval: str = "1s", shards: int = 1, replicas: int = 0
) -> dict[str, Any]:
    """Mapping and settings."""
    return {
        "settings": {
            "index": {
                "number_of_shards": shards,
                "number_of_replicas": replicas,
                "refresh_interval": refresh_interval,
            },
            "analysis": {"analyzer": analyzers(analysis)},
        },
        "mappings": {
            "dynamic": "strict",
            "properties": {
                "tenant_id": {"type": "keyword"},
                "user_id": {"type": "keyword"},
                "chain_id": {"type": "keyword"},
                "content": text_field(),
                "context": text_field(),
                "category": {"type": "keyword"},
                "scope": {"type": "keyword"},
                "session_id": {"type": "keyword"},
                # Agent and run scopes (0017): added to an older index on start-up.
                "agent_id": {"type": "keyword"},
                "run_id": {"type": "keyword"},
                "is_current": {"type": "boolean"},
                "speaker": {"type": "keyword"},
                "event_time": {"type": "date"},
                "created_at": {"type": "date"},
                "superseded_at": {"type": "date"},
                # When the memory expires (0017); added to an older index on start-up.
                "expires_at": {"type": "date"},
                # Every leaf of the memory's metadata, searchable by its dotted path as a
                # keyword (OpenSearch >= 2.7). Added to an older index on start-up; its
                # documents get it at `make reindex`.
                "metadata": {"type": "flat_object"},
                # ISO 639-1 (0028), for filters; added to an older index on start-up.
                "language": {"type": "keyword"},
            },
        },
    }
