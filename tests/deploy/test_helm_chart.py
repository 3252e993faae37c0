"""charts/cognis-memory: the manifests `helm template` renders, read back and checked.

The helm binary comes from scripts/install-helm.sh (built with Go, cached in the per-user cache);
make check-deploy runs it first, and so do these tests when Go is there to build it. Without
either they skip and say so.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.config import SETTING_FIELDS
from tests.deploy.files import ROOT

CHART = ROOT / "charts" / "cognis-memory"
CI_VALUES = sorted((CHART / "ci").glob("*-values.yaml"))
INSTALL = ROOT / "scripts" / "install-helm.sh"


@cache
def helm() -> str:
    if found := os.environ.get("COGNIS_HELM"):
        return found
    if shutil.which("go") is None and shutil.which("helm") is None:
        pytest.skip("no helm: run scripts/install-helm.sh (needs Go) or set COGNIS_HELM")
    if shutil.which("go") is None:
        return shutil.which("helm") or ""
    result = subprocess.run(
        ["bash", str(INSTALL)], capture_output=True, text=True, timeout=1800, check=False
    )
    if result.returncode != 0:
        pytest.skip(f"scripts/install-helm.sh failed: {result.stderr[-500:]}")
    return result.stdout.strip().splitlines()[-1]


@cache
def render(values: str | None = "default", *sets: str) -> tuple[dict[str, Any], ...]:
    command = [helm(), "template", "cognis", str(CHART), "--namespace", "memory"]
    if values:
        command += ["-f", str(CHART / "ci" / f"{values}-values.yaml")]
    for item in sets:
        command += ["--set", item]
    out = subprocess.run(command, capture_output=True, text=True, check=True, timeout=120).stdout
    return tuple(doc for doc in yaml.safe_load_all(out) if doc)


def find(docs: tuple[dict[str, Any], ...], kind: str, suffix: str) -> dict[str, Any]:
    named = [d for d in docs if d["kind"] == kind and d["metadata"]["name"].endswith(suffix)]
    assert len(named) == 1, f"{kind} *{suffix}: {len(named)}"
    return named[0]


def pod(doc: dict[str, Any]) -> dict[str, Any]:
    return doc["spec"]["template"]["spec"]


def containers(docs: tuple[dict[str, Any], ...]) -> list[dict[str, Any]]:
    return [c for d in docs if d["kind"] in ("Deployment", "Job") for c in pod(d)["containers"]]


def settings_env_names() -> set[str]:
    names = set()
    for name, field in SETTING_FIELDS.items():
        names.add("COGNIS_" + name.upper())
        annotation = field.annotation
        for sub in getattr(annotation, "model_fields", {}):
            names.add("COGNIS_" + sub.upper())
    return names


@pytest.mark.parametrize("values", [p.name.removesuffix("-values.yaml") for p in CI_VALUES])
def test_every_cognis_variable_is_a_real_setting(values: str) -> None:
    known = settings_env_names()
    seen = set()
    for container in containers(render(values)):
        for entry in container.get("env", []):
            if entry["name"].startswith("COGNIS_"):
                seen.add(entry["name"])
                assert entry["name"] in known, f"{container['name']}: {entry['name']}"
    assert "COGNIS_DATABASE_URL" in seen


def test_the_migration_job_is_a_pre_install_and_pre_upgrade_hook() -> None:
    docs = render()
    job = find(docs, "Job", "-migrate")
    annotations = job["metadata"]["annotations"]
    assert set(annotations["helm.sh/hook"].split(",")) == {"pre-install", "pre-upgrade"}
    assert "before-hook-creation" in annotations["helm.sh/hook-delete-policy"]
    assert pod(job)["containers"][0]["args"] == ["python", "-m", "app", "migrate"]
    assert pod(job)["restartPolicy"] == "Never"
    # The Secret it reads is a hook of lower weight, so it exists before the Job.
    secret = find(docs, "Secret", "cognis-memory")
    assert secret["metadata"]["annotations"]["helm.sh/hook"] == "pre-install,pre-upgrade"
    assert int(secret["metadata"]["annotations"]["helm.sh/hook-weight"]) < int(
        annotations["helm.sh/hook-weight"]
    )
    # A hook runs before the release's ServiceAccount exists.
    assert "serviceAccountName" not in pod(job)


def test_processes_commands_and_probes_as_in_compose_and_terraform() -> None:
    docs = render()
    commands = {
        d["metadata"]["name"].removeprefix("cognis-cognis-memory-"): pod(d)["containers"][0]["args"]
        for d in docs
        if d["kind"] == "Deployment"
    }
    assert commands["api"] == ["python", "-m", "app", "serve"]
    assert commands["relay"] == ["python", "-m", "app", "relay"]
    assert commands["worker"] == ["python", "-m", "app", "worker"]
    assert commands["embedder"][:4] == ["python", "-m", "app", "embed-serve"]
    assert commands["embedder"][-2:] == ["--backend", "torch"]
    api = pod(find(docs, "Deployment", "-api"))["containers"][0]
    for name in ("relay", "worker"):
        container = pod(find(docs, "Deployment", f"-{name}"))["containers"][0]
        for probe in ("startupProbe", "livenessProbe"):
            assert container[probe]["exec"]["command"] == ["python", "-m", "app", "heartbeat-check"]
    assert api["livenessProbe"]["httpGet"] == {"path": "/health", "port": "http"}
    assert api["readinessProbe"]["httpGet"] == {"path": "/ready", "port": "http"}
    assert api["ports"][0]["containerPort"] == 8000
    embedder = pod(find(docs, "Deployment", "-embedder"))["containers"][0]
    assert embedder["livenessProbe"]["httpGet"]["path"] == "/health"
    assert embedder["ports"][0]["containerPort"] == 8080
    assert find(docs, "Service", "-embedder")["spec"]["ports"][0]["port"] == 8080
    # Every process but the model service embeds through it; it opens no database.
    env = {e["name"]: e for e in api["env"]}
    assert env["COGNIS_EMBEDDING_BACKEND"]["value"] == "http"
    assert (
        env["COGNIS_EMBEDDING_HTTP_URL"]["value"] == "http://cognis-cognis-memory-embedder:8080/v1"
    )
    assert env["COGNIS_RELAY_IN_API"]["value"] == "false"
    assert env["COGNIS_INGEST_WORKER_IN_API"]["value"] == "false"
    assert not {e["name"] for e in embedder["env"]} & {"COGNIS_DATABASE_URL"}


def test_every_secret_reference_names_a_key_the_chart_or_values_define() -> None:
    # Every secret value set: the chart's Secret then holds every key a pod can ask for.
    docs = render("replica-reader", "secrets.llmApiKey=llm-key")
    secret = find(docs, "Secret", "cognis-memory")
    keys = set(secret["stringData"])
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    documented = (CHART / "values.yaml").read_text()
    for container in containers(docs):
        for entry in container.get("env", []):
            ref = entry.get("valueFrom", {}).get("secretKeyRef")
            if ref is None:
                continue
            assert ref["name"] == secret["metadata"]["name"]
            assert ref["key"] in keys, ref
            assert ref["key"] in documented, f"{ref['key']} not listed in values.yaml"
            # The chart knows which keys the Secret holds: no reference is a guess.
            assert not ref.get("optional"), ref
    assert set(values["secrets"]) - {"existingSecret", "existingSecretKeys"} == {
        "databaseUrl",
        "workerDatabaseUrl",
        "migrationDatabaseUrl",
        "readDatabaseUrl",
        "apiKeyHashes",
        "adminKeyHashes",
        "opensearchPassword",
        "embeddingHttpApiKey",
        "llmApiKey",
    }
    api = {e["name"] for e in pod(find(docs, "Deployment", "-api"))["containers"][0]["env"]}
    assert "COGNIS_READ_DATABASE_URL" in api
    # Values left empty put no key in the Secret (the optional reference leaves the setting unset).
    assert set(find(render(), "Secret", "cognis-memory")["stringData"]) == {"database-url"}


def test_an_existing_secret_replaces_the_charts_own() -> None:
    docs = render("existing-secret")
    assert not [d for d in docs if d["kind"] == "Secret"]
    refs = [
        e["valueFrom"]["secretKeyRef"]
        for c in containers(docs)
        for e in c["env"]
        if "valueFrom" in e
    ]
    assert {ref["name"] for ref in refs} == {"cognis-credentials"}
    # Only the keys the values say it holds (read-database-url, admin-key-hashes are not).
    listed = yaml.safe_load((CHART / "ci" / "existing-secret-values.yaml").read_text())
    held = {"database-url", *listed["secrets"]["existingSecretKeys"]}
    assert {ref["key"] for ref in refs} == held
    assert "read-database-url" not in {ref["key"] for ref in refs}
    assert not [d for d in docs if d["kind"] == "ServiceAccount"]
    assert pod(find(docs, "Job", "-migrate"))["serviceAccountName"] == "cognis"


def test_no_database_url_fails_the_render() -> None:
    result = subprocess.run(
        [helm(), "template", "cognis", str(CHART)], capture_output=True, text=True, check=False
    )
    assert result.returncode != 0
    assert "secrets.databaseUrl" in result.stderr


def test_hpa_and_pdb_only_when_enabled() -> None:
    on = render()
    hpa = find(on, "HorizontalPodAutoscaler", "-api")
    assert hpa["spec"]["scaleTargetRef"]["name"] == "cognis-cognis-memory-api"
    assert "replicas" not in find(on, "Deployment", "-api")["spec"]
    find(on, "PodDisruptionBudget", "-api")
    off = render("hpa-off")
    assert not [d for d in off if d["kind"] in ("HorizontalPodAutoscaler", "PodDisruptionBudget")]
    assert find(off, "Deployment", "-api")["spec"]["replicas"] == 3
    # An external embedding endpoint in place of the model service.
    assert not [d for d in off if d["metadata"]["name"].endswith("-embedder")]
    env = {e["name"]: e for e in pod(find(off, "Deployment", "-api"))["containers"][0]["env"]}
    assert env["COGNIS_EMBEDDING_HTTP_URL"]["value"] == "http://embeddings.models.svc:8080/v1"


def test_tracing_reaches_every_process_only_when_asked() -> None:
    def otel(docs: tuple[dict[str, Any], ...]) -> dict[str, dict[str, str]]:
        return {
            c["name"]: {e["name"]: e.get("value", "") for e in c.get("env", [])}
            for c in containers(docs)
        }

    for name, env in otel(render("default")).items():
        assert not [v for v in env if v.startswith("OTEL_") or v == "COGNIS_TRACE_CONTENT"], name
    traced = otel(render("tracing"))
    assert {"api", "relay", "worker", "embedder"} <= set(traced), set(traced)
    for name, env in traced.items():
        assert env["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://otel-collector.observability.svc:4318"
        assert env["OTEL_TRACES_SAMPLER_ARG"] == "0.1", name
        assert env["COGNIS_TRACE_CONTENT"] == "true", name


def test_every_pod_runs_non_root_on_a_read_only_root() -> None:
    docs = render()
    for doc in docs:
        if doc["kind"] not in ("Deployment", "Job", "Pod"):
            continue
        spec = doc["spec"] if doc["kind"] == "Pod" else pod(doc)
        assert spec["securityContext"]["runAsNonRoot"] is True
        assert spec["securityContext"]["runAsUser"] == 10001  # the Dockerfile's USER
        for container in spec["containers"]:
            context = container["securityContext"]
            assert context["readOnlyRootFilesystem"] is True
            assert context["allowPrivilegeEscalation"] is False
            assert context["capabilities"]["drop"] == ["ALL"]
            mounts = {m["mountPath"] for m in container["volumeMounts"]}
            assert "/tmp" in mounts, container["name"]  # noqa: S108 (the emptyDir mount)
            assert container["resources"]["requests"]


def test_the_schema_refuses_unknown_and_malformed_values() -> None:
    for bad in ("api.replica=2", "secrets.apiKeyHashes=not-a-hash", "logLevel=LOUD"):
        result = subprocess.run(
            [helm(), "template", "cognis", str(CHART), "-f", str(CI_VALUES[0]), "--set", bad],
            capture_output=True,
            text=True,
            check=False,
        )
        assert result.returncode != 0, bad
        assert "schema" in result.stderr.lower(), result.stderr


def test_the_docs_link_the_chart() -> None:
    guide = (ROOT / "docs" / "deployment.md").read_text()
    assert "charts/cognis-memory" in guide
    readme = (CHART / "README.md").read_text()
    assert "helm install cognis charts/cognis-memory -f my-values.yaml" in readme
    for operator in ("CloudNativePG", "OpenSearch Kubernetes Operator"):
        assert operator in readme


def test_the_readme_install_against_external_services_renders(tmp_path: Path) -> None:
    """The README's worked `helm install` (an external PostgreSQL with a replica, an external
    OpenSearch), its values file as printed with only the key-hash placeholders filled in:
    it passes the schema and renders; the chart runs no database, every process reaches the
    services the file names, and the Service the README port-forwards exists."""
    install = (CHART / "README.md").read_text().split("## Install", 1)[1]
    printed = install.split("<<'YAML'\n", 1)[1].split("\nYAML\n", 1)[0]
    key_hash = hashlib.sha256(b"a key").hexdigest()
    values = printed.replace("<sha256 hex of each API key, comma-separated>", key_hash)
    values = values.replace("<sha256 hex of the admin key>", key_hash)
    assert "<" not in values, "a placeholder of the README's values is not filled in here"
    (tmp_path / "my-values.yaml").write_text(values)
    command = [helm(), "template", "cognis", str(CHART), "--namespace", "memory"]
    out = subprocess.run(
        [*command, "-f", str(tmp_path / "my-values.yaml")],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    docs = tuple(doc for doc in yaml.safe_load_all(out) if doc)
    given = yaml.safe_load(values)

    assert not [d for d in docs if d["kind"] in ("StatefulSet", "PersistentVolumeClaim")]
    assert {c["image"] for c in containers(docs)} == {"registry.example/cognis-memory:0.1.0"}
    secret = find(docs, "Secret", "-cognis-memory")["stringData"]
    for key, value in (
        ("database-url", "databaseUrl"),
        ("worker-database-url", "workerDatabaseUrl"),
        ("migration-database-url", "migrationDatabaseUrl"),
        ("read-database-url", "readDatabaseUrl"),
        ("api-key-hashes", "apiKeyHashes"),
    ):
        assert secret[key] == given["secrets"][value], key
    reaching = set()
    for container in containers(docs):
        env = {e["name"]: e.get("value") for e in container.get("env", [])}
        if "COGNIS_OPENSEARCH_URL" in env:
            assert env["COGNIS_OPENSEARCH_URL"] == given["opensearch"]["url"]
            assert env["COGNIS_OPENSEARCH_USERNAME"] == given["opensearch"]["username"]
            reaching.add(container["name"])
    assert {"api", "relay", "worker"} <= reaching, reaching
    assert "svc/cognis-cognis-memory-api 8000:8000" in install
    assert find(docs, "Service", "-api")["metadata"]["name"] == "cognis-cognis-memory-api"


def test_chart_files_are_where_ci_expects_them() -> None:
    assert Path(CHART / "values.schema.json").is_file()
    assert {p.name for p in CI_VALUES} == {
        "default-values.yaml",
        "existing-secret-values.yaml",
        "hpa-off-values.yaml",
        "network-policy-values.yaml",
        "replica-reader-values.yaml",
        "tracing-values.yaml",
    }


def secret_env(doc: dict[str, Any]) -> dict[str, str]:
    """A workload's variables that come from the Secret, each with its key."""
    return {
        e["name"]: e["valueFrom"]["secretKeyRef"]["key"]
        for e in pod(doc)["containers"][0]["env"]
        if "valueFrom" in e
    }


# Which settings each process reads (app/runtime.py, app/cli/): the API the request role, the
# replica, the worker role (the index coverage check and dry runs read across tenants), the key
# hashes, the model service and the LLM (dry runs, the category judge); the relay the worker
# role and OpenSearch; the workers those, the model service and the LLM; migrations the owner.
OWN_CREDENTIALS = {
    "api": {
        "COGNIS_DATABASE_URL": "database-url",
        "COGNIS_READ_DATABASE_URL": "read-database-url",
        "COGNIS_WORKER_DATABASE_URL": "worker-database-url",
        "COGNIS_API_KEY_HASHES": "api-key-hashes",
        "COGNIS_ADMIN_KEY_HASHES": "admin-key-hashes",
        "COGNIS_OPENSEARCH_PASSWORD": "opensearch-password",
        "COGNIS_EMBEDDING_HTTP_API_KEY": "embedding-http-api-key",
        "COGNIS_LLM_API_KEY": "llm-api-key",
    },
    "relay": {
        "COGNIS_DATABASE_URL": "worker-database-url",
        "COGNIS_OPENSEARCH_PASSWORD": "opensearch-password",
    },
    "worker": {
        "COGNIS_DATABASE_URL": "worker-database-url",
        "COGNIS_OPENSEARCH_PASSWORD": "opensearch-password",
        "COGNIS_EMBEDDING_HTTP_API_KEY": "embedding-http-api-key",
        "COGNIS_LLM_API_KEY": "llm-api-key",
    },
    "embedder": {"COGNIS_EMBEDDING_HTTP_API_KEY": "embedding-http-api-key"},
    "migrate": {"COGNIS_DATABASE_URL": "migration-database-url"},
}


def test_each_pod_gets_only_its_own_credentials() -> None:
    """Every secret set: the owner's URL reaches the migration Job alone, the LLM key only the
    processes that call the LLM, and the relay and workers connect as the worker role only."""
    docs = render("replica-reader", "secrets.llmApiKey=llm-key")
    given = {
        name: secret_env(find(docs, "Deployment" if name != "migrate" else "Job", f"-{name}"))
        for name in OWN_CREDENTIALS
    }
    assert given == OWN_CREDENTIALS
    api = given["api"]
    assert "migration-database-url" not in api.values()
    assert "COGNIS_MIGRATION_DATABASE_URL" not in api
    assert "llm-api-key" not in given["relay"].values()
    # The API's LLM settings go with llm.inApi: off, it gets neither the key nor the endpoint.
    off = render("replica-reader", "secrets.llmApiKey=llm-key", "llm.inApi=false")
    api_env = {e["name"] for e in pod(find(off, "Deployment", "-api"))["containers"][0]["env"]}
    assert not {n for n in api_env if n.startswith("COGNIS_LLM_")}
    assert secret_env(find(off, "Deployment", "-worker"))["COGNIS_LLM_API_KEY"] == "llm-api-key"


def test_without_own_roles_the_processes_fall_back_to_the_request_roles_url() -> None:
    docs = render("default")
    for kind, name in (("Deployment", "-relay"), ("Deployment", "-worker"), ("Job", "-migrate")):
        assert secret_env(find(docs, kind, name)) == {"COGNIS_DATABASE_URL": "database-url"}


def test_service_monitor_and_network_policies_only_when_switched_on() -> None:
    for values in [p.name.removesuffix("-values.yaml") for p in CI_VALUES]:
        kinds = {d["kind"] for d in render(values)}
        assert "ServiceMonitor" not in kinds, values
        assert ("NetworkPolicy" in kinds) == (values == "network-policy"), values
    docs = render("default", "serviceMonitor.enabled=true", "serviceMonitor.labels.release=prom")
    monitor = find(docs, "ServiceMonitor", "-api")
    assert monitor["metadata"]["labels"]["release"] == "prom"
    service = find(docs, "Service", "-api")
    assert monitor["spec"]["selector"]["matchLabels"] == service["spec"]["selector"]
    (endpoint,) = monitor["spec"]["endpoints"]
    assert (endpoint["port"], endpoint["path"]) == ("http", "/metrics")
    assert service["spec"]["ports"][0]["name"] == "http"


def test_network_policies_open_only_the_ports_each_pod_serves() -> None:
    docs = render("network-policy")
    policies = {
        d["metadata"]["name"].removeprefix("cognis-cognis-memory-"): d["spec"]
        for d in docs
        if d["kind"] == "NetworkPolicy"
    }
    assert set(policies) == {"api", "relay", "worker", "migrate", "embedder"}
    for name in ("relay", "worker", "migrate"):
        assert policies[name]["ingress"] == [], name
    (api_in,) = policies["api"]["ingress"]
    assert api_in["ports"] == [{"port": "http", "protocol": "TCP"}]
    assert api_in["from"][0]["namespaceSelector"]  # values' apiFrom
    # and the `helm test` pod, whose labels the last peer selects
    (test_pod,) = [d for d in docs if d["kind"] == "Pod"]
    tester = api_in["from"][-1]["podSelector"]["matchLabels"]
    assert tester.items() <= test_pod["metadata"]["labels"].items()
    (embedder_in,) = policies["embedder"]["ingress"]
    callers = {
        p["podSelector"]["matchLabels"]["app.kubernetes.io/component"] for p in embedder_in["from"]
    }
    assert callers == {"api", "worker"}
    for name, spec in policies.items():
        assert "Egress" in spec["policyTypes"], name
        peers = [peer for rule in spec["egress"] for peer in rule.get("to", [])]
        assert {"ipBlock": {"cidr": "10.20.0.0/16"}} in peers, name
    # Each policy selects its own component's pods, as the workloads label them.
    for doc in docs:
        if doc["kind"] in ("Deployment", "Job"):
            component = doc["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/component"]
            selector = policies[component]["podSelector"]["matchLabels"]
            assert selector.items() <= doc["spec"]["template"]["metadata"]["labels"].items()


def test_each_component_spreads_over_zones_and_nodes() -> None:
    docs = render()
    for doc in docs:
        if doc["kind"] != "Deployment":
            continue
        labels = doc["spec"]["template"]["metadata"]["labels"]
        constraints = pod(doc)["topologySpreadConstraints"]
        assert [c["topologyKey"] for c in constraints] == [
            "topology.kubernetes.io/zone",
            "kubernetes.io/hostname",
        ]
        for constraint in constraints:
            assert constraint["labelSelector"]["matchLabels"] == labels
            assert constraint["whenUnsatisfiable"] == "ScheduleAnyway"
    off = render("default", "topologySpread.enabled=false")
    assert not [
        d for d in off if d["kind"] == "Deployment" and "topologySpreadConstraints" in pod(d)
    ]


def test_the_heartbeat_probes_read_what_the_loops_write() -> None:
    """The relay's and worker's probes run the check against the directory their loops beat,
    under the pod's writable /tmp; the age the check allows is a value."""
    docs = render("default", "heartbeat.maxAgeSeconds=120")
    for name in ("relay", "worker"):
        container = pod(find(docs, "Deployment", f"-{name}"))["containers"][0]
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert env["COGNIS_HEARTBEAT_DIR"].startswith("/tmp/")  # noqa: S108 (the emptyDir)
        assert env["COGNIS_HEARTBEAT_MAX_AGE_S"] == "120"
        assert container["livenessProbe"]["periodSeconds"] >= 10
    api = pod(find(docs, "Deployment", "-api"))["containers"][0]
    assert "COGNIS_HEARTBEAT_DIR" not in {e["name"] for e in api["env"]}


def test_helm_test_gets_ready_through_the_api_service() -> None:
    docs = render()
    (test_pod,) = [d for d in docs if d["kind"] == "Pod"]
    assert test_pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    service = find(docs, "Service", "-api")
    script = test_pod["spec"]["containers"][0]["command"][-1]
    name, port = service["metadata"]["name"], service["spec"]["ports"][0]["port"]
    assert f"http://{name}:{port}/ready" in script
    assert not [d for d in render("default", "tests.enabled=false") if d["kind"] == "Pod"]


def test_notes_say_which_credentials_each_pod_gets() -> None:
    out = subprocess.run(
        [
            helm(),
            "install",
            "cognis",
            str(CHART),
            "--dry-run=client",
            "-n",
            "memory",
            "-f",
            str(CHART / "ci" / "replica-reader-values.yaml"),
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    notes = out.split("NOTES:", 1)[1]
    assert "svc/cognis-cognis-memory-api 8000:8000" in notes
    assert "helm test cognis" in notes
    lines = {line.split(":", 1)[0].strip(): line for line in notes.splitlines() if ":" in line}
    assert "migration-database-url" not in lines["api"]
    assert lines["migrate"].split(":", 1)[1].split() == ["migration-database-url"]
    assert "per API pod" in notes
    warned = subprocess.run(
        [helm(), "install", "cognis", str(CHART), "--dry-run=client", "-f", str(CI_VALUES[0])],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    assert "WARNING: no worker-database-url" in warned
