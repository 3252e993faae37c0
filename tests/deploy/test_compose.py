"""compose.yaml: valid against the Compose Specification, and its settings are the service's."""

from __future__ import annotations

import json
from importlib import resources

import jsonschema
import pytest

from app.config import SETTING_FIELDS, Settings
from tests.deploy.files import COMPOSE, ROOT, load_compose

APP_IMAGE_SERVICES = ("migrate", "api", "relay", "worker")
# Variables of the cognis services that are not settings (none today; keep it that way).
# The standard OpenTelemetry variable traces are turned on by (app/tracing/setup.py).
NON_SETTING_ENV: set[str] = {"OTEL_EXPORTER_OTLP_ENDPOINT"}


def _compose_schema() -> dict:
    # check-jsonschema vendors the Compose Specification's own JSON schema.
    schema = resources.files("check_jsonschema.builtin_schemas.vendor") / "compose-spec.json"
    return json.loads(schema.read_text())


def _settings_env_names() -> set[str]:
    prefix = Settings.model_config["env_prefix"]
    return {prefix.upper() + name.upper() for name in SETTING_FIELDS}


def _required_env_names() -> set[str]:
    prefix = Settings.model_config["env_prefix"]
    return {prefix.upper() + n.upper() for n, f in SETTING_FIELDS.items() if f.is_required()}


def test_compose_file_is_valid_against_the_compose_specification() -> None:
    schema = _compose_schema()
    assert "Compose" in schema.get("title", ""), schema.get("title")
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(load_compose()), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors)


def test_the_schema_validator_rejects_an_invalid_service() -> None:
    broken = {"services": {"api": {"image": "x", "restart": "unless-stopped", "bogus": 1}}}
    validator = jsonschema.Draft202012Validator(_compose_schema())
    assert list(validator.iter_errors(broken))


@pytest.mark.parametrize("service", APP_IMAGE_SERVICES)
def test_every_variable_compose_sets_is_a_setting(service: str) -> None:
    environment = load_compose()["services"][service]["environment"]
    assert isinstance(environment, dict), f"{service}: use the mapping form for environment"
    unknown = set(environment) - _settings_env_names() - NON_SETTING_ENV
    assert not unknown, f"{service} sets variables app/config.py does not read: {sorted(unknown)}"


@pytest.mark.parametrize("service", APP_IMAGE_SERVICES)
def test_every_required_setting_is_set(service: str) -> None:
    environment = load_compose()["services"][service]["environment"]
    missing = _required_env_names() - set(environment)
    assert not missing, f"{service} lacks required settings {sorted(missing)}"


def test_services_share_one_image_and_the_cli_entry_points() -> None:
    services = load_compose()["services"]
    images = {services[name]["image"] for name in APP_IMAGE_SERVICES}
    assert len(images) == 1, images
    assert "build" in services["migrate"]
    commands = {name: services[name]["command"] for name in APP_IMAGE_SERVICES}
    assert commands == {
        "migrate": ["python", "-m", "app", "migrate"],
        "api": ["python", "-m", "app", "serve"],
        "relay": ["python", "-m", "app", "relay"],
        "worker": ["python", "-m", "app", "worker"],
    }


def test_the_api_waits_for_the_migration_and_healthy_stores() -> None:
    services = load_compose()["services"]
    assert services["migrate"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert services["migrate"]["restart"] == "no"
    for name in ("api", "relay", "worker"):
        depends = services[name]["depends_on"]
        assert depends["migrate"]["condition"] == "service_completed_successfully", name
        assert depends["opensearch"]["condition"] == "service_healthy", name


def test_stores_are_the_right_images_with_health_checks_and_named_volumes() -> None:
    compose = load_compose()
    services = compose["services"]
    assert services["postgres"]["image"].startswith("pgvector/pgvector:pg")
    assert services["opensearch"]["image"].startswith("opensearchproject/opensearch:2.")
    assert services["opensearch"]["environment"]["discovery.type"] == "single-node"
    for name in ("postgres", "opensearch", "api"):
        assert services[name]["healthcheck"]["test"], name
    assert "/ready" in " ".join(services["api"]["healthcheck"]["test"])
    named = set(compose["volumes"])
    for name in ("postgres", "opensearch"):
        # Data lives on named volumes; files of this repository are mounted read-only.
        mounts = [v.split(":") for v in services[name]["volumes"]]
        sources = {m[0] for m in mounts if not m[0].startswith("./")}
        assert sources <= named, f"{name} mounts {sources}, named volumes are {named}"
        for source, *_, mode in (m for m in mounts if m[0].startswith("./")):
            assert (ROOT / source).is_file() and mode == "ro", source


def test_postgres_creates_the_service_logins_the_urls_name() -> None:
    compose = load_compose()
    env = compose["x-cognis-env"]
    init = [v for v in compose["services"]["postgres"]["volumes"] if "initdb.d" in v]
    assert init and init[0].startswith("./scripts/compose-postgres-roles.sh:")
    logins = {
        variable: env[variable].split("//", 1)[1].split(":", 1)[0]
        for variable in (
            "COGNIS_DATABASE_URL",
            "COGNIS_WORKER_DATABASE_URL",
            "COGNIS_MIGRATION_DATABASE_URL",
        )
    }
    assert logins == {
        "COGNIS_DATABASE_URL": "cognis_app",
        "COGNIS_WORKER_DATABASE_URL": "cognis_worker",
        "COGNIS_MIGRATION_DATABASE_URL": "cognis",
    }
    script = (ROOT / "scripts" / "compose-postgres-roles.sh").read_text()
    assert "app=cognis_app" in script and "worker=cognis_worker" in script


def test_published_ports_are_bound_to_loopback() -> None:
    for name, service in load_compose()["services"].items():
        for port in service.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), f"{name} publishes {port} on every interface"


def test_compose_file_names_no_variable_twice() -> None:
    # YAML would silently keep the last of two equal keys.
    text = COMPOSE.read_text()
    keys = [line.split(":", 1)[0].strip() for line in text.splitlines() if "COGNIS_" in line]
    keys = [k for k in keys if k.startswith("COGNIS_")]
    assert len(keys) == len(set(keys)), sorted(k for k in keys if keys.count(k) > 1)


def test_every_service_embeds_through_the_model_service_from_the_same_image() -> None:
    services = load_compose()["services"]
    embedder = services["embedder"]
    assert "profiles" not in embedder  # part of the default stack
    for name in ("api", "relay", "worker"):
        assert services[name]["depends_on"]["embedder"]["condition"] == "service_healthy", name
        environment = services[name]["environment"]
        assert environment["COGNIS_EMBEDDING_BACKEND"].endswith(":-http}"), name
        assert "http://embedder:8080/v1" in environment["COGNIS_EMBEDDING_HTTP_URL"], name
    assert embedder["image"] == services["api"]["image"]
    assert embedder["command"][:4] == ["python", "-m", "app", "embed-serve"]
    assert "ports" not in embedder  # reached by the other services only
    assert "/health" in " ".join(embedder["healthcheck"]["test"])
    unknown = set(embedder["environment"]) - _settings_env_names() - NON_SETTING_ENV
    assert not unknown, unknown
    port = embedder["command"][embedder["command"].index("--port") + 1]
    assert f":{port}/" in " ".join(embedder["healthcheck"]["test"])
