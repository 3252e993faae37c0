"""The settings: grouped, every field described, and the reference in docs/configuration.md
generated from them.

The variables are the service's public interface (compose files, terraform, operators' .env):
`EXPECTED_DEFAULTS` pins every one and its default, so a rename or a changed default is a
deliberate edit here, not a side effect.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic_core import PydanticUndefined

from app.config import GROUP_OF, GROUPS, SETTING_FIELDS, SETTINGS_GROUPS, Settings
from app.settings_doc import BEGIN, END, env_name, settings_reference, shown_default

README = Path(__file__).resolve().parents[1] / "docs" / "configuration.md"
REQUIRED = PydanticUndefined

EXPECTED_DEFAULTS: dict[str, object] = {
    # StoreSettings
    "database_url": REQUIRED,
    "worker_database_url": None,
    "migration_database_url": None,
    "backup_database_url": None,
    "db_pool_size": 10,
    "db_pooler": "none",
    "direct_database_url": None,
    "read_database_url": None,
    "replica_wait_max_ms": 1000,
    "replica_retry_s": 5.0,
    "replica_connect_timeout_s": 2.0,
    "opensearch_url": "http://127.0.0.1:59200",
    "opensearch_username": None,
    "opensearch_password": None,
    "opensearch_index": "cognis-memories",
    "opensearch_timeout_s": 5.0,
    "opensearch_refresh_interval": "250ms",
    "opensearch_shards": 1,
    "opensearch_replicas": None,
    # EmbeddingSettings
    "embedding_model": "sentence-transformers/all-mpnet-base-v2",
    "embedding_device": "cpu",
    "embedding_batch_size": 32,
    "embedding_batch_wait_ms": 5.0,
    "embedding_max_call_ms": 1000.0,
    "embedding_forward_batch_size": 8,
    "embedding_backend": "torch",
    "embedding_intra_op_threads": None,
    "embedding_onnx_cache_dir": None,
    "query_embedding_cache_size": 1024,
    "multilingual_embedder": True,
    "query_embedding_backend": "onnx-int8",
    "query_embedding_batch_wait_ms": 0.0,
    "query_embedding_intra_op_threads": 1,
    "embedding_http_url": None,
    "embedding_http_model": None,
    "embedding_http_api_key": None,
    "embedding_http_dimensions": None,
    "embedding_http_timeout_s": 10.0,
    "embedding_http_queue_timeout_s": 600.0,
    "embedding_http_max_retries": 2,
    "embedding_http_backoff_base_s": 0.25,
    # ApiSettings
    "host": "127.0.0.1",
    "port": 8000,
    "max_content_chars": 8000,
    "max_batch_size": 100,
    "max_metadata_bytes": 16384,
    "log_json": None,
    "log_level": "INFO",
    "trace_content": False,
    "write_deadline_ms": 30000,
    "bulk_write_deadline_ms": 55000,
    "idempotency_ttl_s": 86400.0,
    "console_session_hours": 12.0,
    # KeySettings
    "api_key_hashes": "",
    "admin_key_hashes": "",
    "metrics_key_hashes": "",
    "rate_limit_per_s": 0.0,
    "rate_limit_burst": None,
    # RetrievalSettings
    "candidates_256d": 200,
    "candidates_768d": 50,
    "bm25_candidates": 50,
    "hnsw_ef_search": 200,
    "exact_search_max_memories": 5000,
    "rrf_k": 10,
    "rrf_weight_vector": 0.7,
    "rrf_weight_bm25": 0.3,
    "default_top_k": 10,
    "max_top_k": 100,
    "temporal_weight_fused": 0.6,
    "temporal_weight_time": 0.4,
    "temporal_min_score": 0.1,
    "dedup_threshold": 0.99,
    "min_relevance": 0.15,
    "multilingual_min_relevance": 0.15,
    "multilingual_order_margin": 0.05,
    "cross_encoder_model": None,
    "rerank_top_n": 20,
    "history_max_versions": 20,
    "memory_context_turns": 1,
    "sentence_vectors": True,
    "sentence_vectors_at_write": 64,
    "retrieval_profile": "default",
    "bm25_context_boost": 0.5,
    "bm25_proximity_slop": 5,
    "speaker_boost": 0.2,
    "feedback_top": 3,
    "feedback_weight": 0.75,
    "entity_boost": 0.2,
    "entities": True,
    "entity_hop_top_n": 5,
    "entity_hop_limit": 10,
    "entity_hop_decay": 0.5,
    "entity_hop_max_memories": 30,
    "neighbour_top_n": 10,
    "neighbour_decay": 0.5,
    "time_mention_boost": 0.2,
    "part_slots": 2,
    "session_top_n": 30,
    "session_boost": 0.3,
    "session_decay": 0.85,
    "specificity_boost": 0.15,
    "specificity_words": 5,
    "specificity_sample": 500,
    "specificity_ttl_s": 300.0,
    "specificity_prior": 50.0,
    "relevance_order_margin": 0.1,
    "relevance_order_head": 3,
    # RelaySettings
    "relay_in_api": True,
    "relay_batch_size": 1000,
    "opensearch_bulk_max_docs": 1000,
    "opensearch_bulk_max_bytes": 5000000,
    "opensearch_bulk_concurrency": 2,
    "relay_poll_interval_s": 2.0,
    "relay_backoff_base_s": 1.0,
    "relay_backoff_max_s": 300.0,
    "webhook_allow_private": False,
    "webhook_max_attempts": 8,
    "webhook_timeout_s": 10.0,
    "webhook_concurrency": 50,
    "webhook_tenant_concurrency": 4,
    "webhook_backoff_base_s": 2.0,
    "erase_handoff_s": 30.0,
    "erase_tombstone_s": 86400.0,
    "expiry_reap_interval_s": 60.0,
    "expiry_reap_batch_size": 500,
    "index_wait_max_ms": 5000,
    "index_wait_poll_ms": 50,
    "index_check_interval_s": 30.0,
    "index_requeue_empty": True,
    "heartbeat_dir": None,
    "heartbeat_max_age_s": 300.0,
    # RetentionSettings
    "retention_interval_s": 3600.0,
    "retention_batch_size": 1000,
    "outbox_retention_hours": 24.0,
    "ingest_task_retention_days": 7.0,
    "batch_job_retention_days": 7.0,
    "webhook_retention_days": 7.0,
    # LlmSettings
    "llm_base_url": None,
    "llm_model": None,
    "llm_api_key": None,
    "llm_timeout_s": 30.0,
    "llm_max_retries": 2,
    "llm_backoff_base_s": 0.5,
    "llm_response_format": "auto",
    "llm_max_tokens": 1024,
    "llm_gguf_path": None,
    "llm_local_port": 8089,
    "llm_local_threads": 1,
    "llm_local_context": 4096,
    # IngestSettings
    "ingest_candidates": 10,
    "ingest_llm_gate_threshold": 0.3,
    "ingest_duplicate_threshold": 0.99,
    "ingest_facts": True,
    "ingest_corrections": True,
    "ingest_correction_threshold": 0.6,
    "ingest_supersedes": True,
    "ingest_supersedes_threshold": 0.73,
    "ingest_supersedes_threshold_ja": 0.72,
    "ingest_llm_update_floor": 0.25,
    "ingest_max_messages": 100,
    "ingest_worker_in_api": True,
    "ingest_worker_concurrency": 2,
    "ingest_queue": "default",
    "ingest_poll_interval_s": 0.5,
    "ingest_lease_s": 15.0,
    "ingest_heartbeat_s": 5.0,
    "ingest_max_attempts": 5,
    "ingest_max_wait_s": 30.0,
    "ingest_outage_max_age_s": 21600.0,
    "ingest_settle_ms": 0,
    "ingest_wait_timeout_s": 60.0,
    "ingest_claim_max_messages": 32,
    "ingest_claim_max_users": 16,
    "category_uncertain_margin": 0.1,
    "category_cache_dir": None,
}


def test_every_setting_keeps_its_name_and_default() -> None:
    actual = {name: field.default for name, field in SETTING_FIELDS.items()}
    assert actual == EXPECTED_DEFAULTS


def test_every_setting_belongs_to_exactly_one_described_group() -> None:
    # The whole holds one object per group, nothing else.
    assert {name: field.annotation for name, field in Settings.model_fields.items()} == GROUPS
    assert tuple(GROUPS.values()) == SETTINGS_GROUPS
    owners: dict[str, list[str]] = {}
    for group in SETTINGS_GROUPS:
        doc = (group.__doc__ or "").strip()
        assert "\n\n" in doc, f"{group.__name__}: a title line, a blank line, then what it covers"
        for name in group.model_fields:
            owners.setdefault(name, []).append(group.__name__)
    assert set(owners) == set(SETTING_FIELDS)
    assert {name: groups for name, groups in owners.items() if len(groups) > 1} == {}


@pytest.mark.parametrize("name", sorted(EXPECTED_DEFAULTS))
def test_every_setting_is_described_and_read_from_its_variable(name: str) -> None:
    field = SETTING_FIELDS[name]
    assert field.description and len(field.description) > 8, f"{name} needs a description"
    # No alias: the variable is the prefix and the field's name, nothing else.
    assert (field.alias, field.validation_alias) == (None, None)
    assert Settings.model_config["env_prefix"] == "COGNIS_"


def test_a_variable_of_each_group_reaches_its_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    changed = {
        "opensearch_index": "elsewhere",
        "embedding_device": "cuda:1",
        "log_level": "DEBUG",
        "admin_key_hashes": "ab",
        "rrf_k": 7,
        "relay_batch_size": 11,
        "retention_batch_size": 12,
        "llm_local_port": 9001,
        "ingest_queue": "slow",
    }
    groups = {g.__name__ for g in SETTINGS_GROUPS for n in g.model_fields if n in changed}
    assert groups == {g.__name__ for g in SETTINGS_GROUPS}
    monkeypatch.setenv("COGNIS_DATABASE_URL", "postgresql+asyncpg://u:p@127.0.0.1:1/db")
    for name, value in changed.items():
        monkeypatch.setenv(env_name(name), str(value))
    settings = Settings()  # type: ignore[call-arg]
    assert {name: getattr(getattr(settings, GROUP_OF[name]), name) for name in changed} == changed


def test_the_readme_reference_is_generated_from_the_settings() -> None:
    text = README.read_text()
    block = text[text.index(BEGIN) : text.index(END) + len(END)]
    assert block == settings_reference(), "run `python -m app.settings_doc` to regenerate it"


def test_every_variable_of_the_readme_table_is_a_setting_with_its_default() -> None:
    rows = {
        match["var"]: match["default"]
        for match in re.finditer(
            r"^\| `(?P<var>COGNIS_[A-Z0-9_]+)` \| (?P<default>[^|]+) \|", README.read_text(), re.M
        )
    }
    expected = {env_name(name): shown_default(field) for name, field in SETTING_FIELDS.items()}
    assert {var: default.strip() for var, default in rows.items()} == expected
