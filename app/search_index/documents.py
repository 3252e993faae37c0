"""The OpenSearch document for one memory version, and the index mapping."""

from __future__ import annotations

import uuid
from typing import Any

from app.db.models import Memory


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
        "is_current": memory.is_current,
        "speaker": memory.speaker,
        "event_time": memory.event_time.isoformat() if memory.event_time else None,
        "created_at": memory.created_at.isoformat() if memory.created_at else None,
        "superseded_at": memory.superseded_at.isoformat() if memory.superseded_at else None,
    }


def with_tenant(document: dict[str, Any], tenant_id: uuid.UUID) -> dict[str, Any]:
    """The document as indexed: with its tenant, taken from the outbox row (which got it in the
    memory's own transaction), so every query can filter on it."""
    return {**document, "tenant_id": str(tenant_id)}


def added_fields(english_analyzer: bool) -> dict[str, Any]:
    """Fields later versions added to the mapping: put into an older index on start-up."""
    properties = index_body(english_analyzer)["mappings"]["properties"]
    return {"properties": {name: properties[name] for name in ("context", "tenant_id")}}


def index_body(english_analyzer: bool, refresh_interval: str = "1s") -> dict[str, Any]:
    """Mapping and settings. `english` (stemming) needs the analysis-common module."""
    analyzer: dict[str, Any] = (
        {"type": "english"} if english_analyzer else {"type": "standard", "stopwords": "_english_"}
    )
    return {
        "settings": {
            "index": {
                "number_of_shards": 1,
                "number_of_replicas": 0,
                "refresh_interval": refresh_interval,
            },
            "analysis": {"analyzer": {"memory_text": analyzer}},
        },
        "mappings": {
            "dynamic": "strict",
            "properties": {
                "tenant_id": {"type": "keyword"},
                "user_id": {"type": "keyword"},
                "chain_id": {"type": "keyword"},
                "content": {"type": "text", "analyzer": "memory_text"},
                "context": {"type": "text", "analyzer": "memory_text"},
                "category": {"type": "keyword"},
                "scope": {"type": "keyword"},
                "session_id": {"type": "keyword"},
                "is_current": {"type": "boolean"},
                "speaker": {"type": "keyword"},
                "event_time": {"type": "date"},
                "created_at": {"type": "date"},
                "superseded_at": {"type": "date"},
            },
        },
    }
