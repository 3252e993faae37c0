"""docs/observability/: every series the Grafana dashboard and the Prometheus alert rules name
exists in the API's real /metrics (after real traffic), with the labels they select on; the
alerts keep the CloudWatch alarms' thresholds (terraform/)."""

from __future__ import annotations

import json
import re
from collections import defaultdict

import httpx
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import ROOT, only_running
from tests.deploy.files import load_root

pytestmark = pytest.mark.usefixtures("ingest_worker")  # messages through the in-process API

OBSERVABILITY = ROOT / "docs" / "observability"
# A metric name, then optionally its label matchers: cognis_x_total{leg="bm25", a=~"5.."}.
SELECTOR = re.compile(r"\b(cognis_[a-z0-9_]+|up)\b(\{[^}]*\})?")
LABEL_MATCHER = re.compile(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)")
PROMETHEUS_OWN = {"up"}  # synthesised by Prometheus for each scrape target


def alert_rules() -> list[dict]:
    groups = yaml.safe_load((OBSERVABILITY / "prometheus-alerts.yml").read_text())["groups"]
    return [rule for group in groups for rule in group["rules"]]


def dashboard_exprs() -> list[str]:
    dashboard = json.loads((OBSERVABILITY / "grafana-dashboard.json").read_text())
    return [t["expr"] for panel in dashboard["panels"] for t in panel["targets"]]


@pytest.fixture
async def scraped(client: httpx.AsyncClient, user_id: str) -> dict[str, list[dict[str, str]]]:
    """Sample name -> the label sets of its samples, after a write, a search and a message."""
    created = await client.post(
        f"/v1/users/{user_id}/memories", json={"content": "Ivo grows chillies on his balcony."}
    )
    assert created.status_code == 201, created.text
    searched = await client.post(
        f"/v1/users/{user_id}/search", json={"query": "What does Ivo grow?", "explain": True}
    )
    assert searched.status_code == 200, searched.text
    # Only this process's worker may take the message: an API process of this session (the
    # `api` fixture's, same database) runs a worker too, and a message it took would count in
    # its /metrics, not in this one's.
    with only_running():
        ingested = await client.post(
            f"/v1/users/{user_id}/messages",
            params={"wait": "true"},
            json={"messages": [{"content": "I run a half marathon every spring."}]},
        )
    assert ingested.json()["state"] == "done", ingested.text
    response = await client.get("/metrics", headers={"X-API-Key": ""})
    assert response.status_code == 200
    samples: dict[str, list[dict[str, str]]] = defaultdict(list)
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            samples[sample.name].append(sample.labels)
    return samples


def test_every_series_named_exists_with_its_labels(
    scraped: dict[str, list[dict[str, str]]],
) -> None:
    exprs = [rule["expr"] for rule in alert_rules()] + dashboard_exprs()
    named = set()
    for expr in exprs:
        selectors = SELECTOR.findall(expr)
        assert selectors, f"names no metric: {expr}"
        for name, matchers in selectors:
            named.add(name)
            if name in PROMETHEUS_OWN:
                continue
            assert name in scraped, f"{name} (in {expr!r}) is not in /metrics"
            known_labels = {key for labels in scraped[name] for key in labels}
            for label, _ in LABEL_MATCHER.findall(matchers):
                assert label in known_labels, f"{name} has no label {label!r} ({expr!r})"
    # What the issue asks the dashboard to show, and the alerts to watch.
    for wanted in (
        "cognis_retrieval_stage_seconds_bucket",
        "cognis_outbox_oldest_pending_seconds",
        "cognis_ingest_messages_total",
        "cognis_ingest_llm_answers_total",
        "cognis_http_requests_total",
        "cognis_opensearch_cpu_percent",
        "cognis_embedding_queue_wait_seconds_bucket",
        "cognis_embedding_queue_texts",
    ):
        assert wanted in named


def test_the_traffic_shows_in_the_series(
    scraped: dict[str, list[dict[str, str]]], user_id: str
) -> None:
    stages = {labels["stage"] for labels in scraped["cognis_retrieval_stage_seconds_count"]}
    assert {"vector_256d", "vector_768d", "bm25", "rrf_fusion"} <= stages
    assert {"extractor": "deterministic", "fallback": "false"} in scraped[
        "cognis_ingest_messages_total"
    ]
    assert scraped["cognis_opensearch_cpu_percent"], "no OpenSearch node reported"
    # The model queue's series, per scheduling class, from the start.
    classes = {labels["class"] for labels in scraped["cognis_embedding_queue_wait_seconds_count"]}
    assert classes == {"query", "interactive", "bulk", "background"}
    routes = {labels["path"] for labels in scraped["cognis_http_requests_total"]}
    assert "/v1/users/{user_id}/search" in routes
    # Labelled by route template: no user id becomes a label value (unbounded cardinality).
    assert all(
        user_id not in value for name in scraped for s in scraped[name] for value in s.values()
    )


def test_alerts_keep_the_cloudwatch_thresholds() -> None:
    variables = load_root().variables
    rules = {rule["alert"]: rule for rule in alert_rules()}
    p95_seconds = variables["retrieval_p95_threshold_ms"]["default"] / 1000
    assert rules["CognisRetrievalP95High"]["expr"].strip().endswith(f"> {p95_seconds:g}")
    cpu = variables["opensearch_cpu_threshold"]["default"]
    assert rules["CognisOpenSearchCpuHigh"]["expr"].strip().endswith(f"> {cpu:g}")
    assert {"CognisApiDown", "CognisApi5xx", "CognisOutboxLagging"} <= set(rules)
    for rule in rules.values():
        assert rule["labels"]["severity"] in {"warning", "critical"}
        assert rule["annotations"]["summary"]


def test_the_postgres_rules_watch_the_exporters_series() -> None:
    """postgres-alerts.yml: rules on postgres_exporter's series only (the service's are in
    prometheus-alerts.yml, checked above against a real scrape), each with its severity."""
    groups = yaml.safe_load((OBSERVABILITY / "postgres-alerts.yml").read_text())["groups"]
    rules = {rule["alert"]: rule for group in groups for rule in group["rules"]}
    assert {
        "PostgresDown",
        "PostgresConnectionsNearLimit",
        "PostgresIdleInTransaction",
        "PostgresReplicaLagging",
    } <= set(rules)
    for name, rule in rules.items():
        assert re.search(r"\bpg_[a-z_]+", rule["expr"]), name
        assert "cognis_" not in rule["expr"], name
        assert rule["labels"]["severity"] in {"warning", "critical"}, name
        assert rule["annotations"]["summary"], name
