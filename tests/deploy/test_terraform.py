"""terraform/: the properties pattern B promises, read from the HCL itself (python-hcl2).

`terraform validate` needs the AWS provider, which cannot be downloaded here; these tests and
checkov (make check-deploy) are what checks the configuration offline.
"""

from __future__ import annotations

import re

import pytest

from app.config import SETTING_FIELDS
from tests.deploy.files import TERRAFORM, all_modules, heredoc_text, load_module, load_root


def _settings_env_names() -> set[str]:
    return {"COGNIS_" + name.upper() for name in SETTING_FIELDS}


def test_every_file_parses_and_every_module_is_used() -> None:
    root = load_root()
    used = {body["source"] for body in root.modules.values()}
    on_disk = {f"./modules/{p.name}" for p in (TERRAFORM / "modules").iterdir() if p.is_dir()}
    assert used == on_disk
    for module in all_modules():
        assert list(module.path.glob("*.tf")), module.path


def test_variables_and_outputs_are_typed_and_described() -> None:
    for module in all_modules():
        for name, body in module.variables.items():
            assert body.get("description"), f"{module.path.name}: variable {name}"
            assert "type" in body, f"{module.path.name}: variable {name}"
        for name, body in module.outputs.items():
            assert body.get("description"), f"{module.path.name}: output {name}"


def test_vpc_and_subnets_are_inputs_not_created() -> None:
    root = load_root()
    for name in ("vpc_id", "private_subnet_ids", "public_subnet_ids"):
        assert name in root.variables
        assert "default" not in root.variables[name], name
    for module in all_modules():
        assert "aws_vpc" not in module.resources
        assert "aws_subnet" not in module.resources


# ---------------------------------------------------------------- Aurora


def test_aurora_serverless_v2_postgres_16_encrypted_and_protected() -> None:
    aurora = load_module("aurora")
    cluster = aurora.resource("aws_rds_cluster", "this")
    assert cluster["engine"] == "aurora-postgresql"
    assert cluster["engine_mode"] == "provisioned"
    assert str(aurora.resolve(cluster["engine_version"])).startswith("16.")
    assert cluster["storage_encrypted"] is True
    assert cluster["deletion_protection"] is True
    assert cluster["manage_master_user_password"] is True
    assert "master_password" not in cluster
    assert cluster["skip_final_snapshot"] is False
    scaling = cluster["serverlessv2_scaling_configuration"][0]
    assert aurora.resolve(scaling["min_capacity"]) == 0.5
    assert aurora.resolve(scaling["max_capacity"]) == 16
    instance = aurora.resource("aws_rds_cluster_instance", "this")
    assert instance["instance_class"] == "db.serverless"
    assert aurora.resolve(instance["count"]) == 2


def test_aurora_requires_tls() -> None:
    group = load_module("aurora").resource("aws_rds_cluster_parameter_group", "this")
    assert group["family"] == "aurora-postgresql16"
    params = {p["name"]: p["value"] for p in group["parameter"]}
    assert params["rds.force_ssl"] == "1"
    assert load_module("ecs").locals["base_environment"]["DB_SSL"] == "require"


def test_aurora_carries_the_dba_notes() -> None:
    """docs/deployment.md's maintenance_work_mem and autovacuum advice is in the parameter group."""
    group = load_module("aurora").resource("aws_rds_cluster_parameter_group", "this")
    params = {p["name"]: p["value"] for p in group["parameter"]}
    assert int(params["maintenance_work_mem"]) >= 1024 * 1024  # kB: at least 1 GB
    assert float(params["autovacuum_vacuum_scale_factor"]) <= 0.05
    assert float(params["autovacuum_analyze_scale_factor"]) <= 0.05
    guide = (TERRAFORM.parent / "docs" / "deployment.md").read_text()
    assert "maintenance_work_mem" in guide and "autovacuum_vacuum_scale_factor" in guide


def test_pgvector_comes_from_the_first_migration() -> None:
    first = sorted((TERRAFORM.parent / "migrations" / "versions").glob("*.py"))[0]
    assert "CREATE EXTENSION IF NOT EXISTS vector" in first.read_text()


# ---------------------------------------------------------------- OpenSearch


def test_opensearch_domain_shape() -> None:
    opensearch = load_module("opensearch")
    domain = opensearch.resource("aws_opensearch_domain", "this")
    assert str(opensearch.resolve(domain["engine_version"])).startswith("OpenSearch_2.")
    cluster = domain["cluster_config"][0]
    assert opensearch.resolve(cluster["instance_type"]) == "r6g.large.search"
    assert opensearch.resolve(cluster["instance_count"]) == 3
    assert cluster["zone_awareness_enabled"] is True
    assert cluster["zone_awareness_config"][0]["availability_zone_count"] == 3
    ebs = domain["ebs_options"][0]
    assert ebs["volume_type"] == "gp3"
    assert opensearch.resolve(ebs["volume_size"]) == 100
    assert (ebs["throughput"], ebs["iops"]) == (250, 3000)


def test_opensearch_encryption_tls_and_fine_grained_access() -> None:
    domain = load_module("opensearch").resource("aws_opensearch_domain", "this")
    assert domain["encrypt_at_rest"][0]["enabled"] is True
    assert domain["node_to_node_encryption"][0]["enabled"] is True
    endpoint = domain["domain_endpoint_options"][0]
    assert endpoint["enforce_https"] is True
    assert re.fullmatch(r"Policy-Min-TLS-1-2-.*", endpoint["tls_security_policy"])
    security = domain["advanced_security_options"][0]
    assert security["enabled"] is True
    assert security["anonymous_auth_enabled"] is False
    assert domain["auto_tune_options"][0]["desired_state"] == "ENABLED"
    assert "vpc_options" in domain


def test_opensearch_service_role_is_limited_to_its_index_and_mapped_to_the_task_role() -> None:
    ecs = load_module("ecs")
    script = heredoc_text(ecs.locals["opensearch_bootstrap"])
    compile(script, "opensearch_bootstrap", "exec")
    assert '"roles/cognis_app"' in script and '"rolesmapping/cognis_app"' in script
    assert 'e["OS_BACKEND_ROLE"]' in script
    container = ecs.resource("aws_ecs_task_definition", "opensearch_bootstrap")
    assert "aws_iam_role.task.arn" in container["container_definitions"]
    assert load_root().modules["ecs"]["opensearch"]["app_index_pattern"] == "cognis-memories*"


def test_opensearch_snapshot_bucket_is_private_encrypted_and_versioned() -> None:
    opensearch = load_module("opensearch")
    assert "snapshots" in opensearch.resources["aws_s3_bucket"]
    block = opensearch.resource("aws_s3_bucket_public_access_block", "snapshots")
    assert all(
        block[k] is True
        for k in (
            "block_public_acls",
            "block_public_policy",
            "ignore_public_acls",
            "restrict_public_buckets",
        )
    )
    sse = opensearch.resource("aws_s3_bucket_server_side_encryption_configuration", "snapshots")
    default = sse["rule"][0]["apply_server_side_encryption_by_default"][0]
    assert default["sse_algorithm"] == "aws:kms"
    versioning = opensearch.resource("aws_s3_bucket_versioning", "snapshots")
    assert versioning["versioning_configuration"][0]["status"] == "Enabled"


# ---------------------------------------------------------------- ECS and the load balancer


def test_api_service_two_fargate_tasks_with_circuit_breaker_rollback() -> None:
    ecs = load_module("ecs")
    service = ecs.resource("aws_ecs_service", "api")
    assert service["launch_type"] == "FARGATE"
    assert ecs.resolve(service["desired_count"]) == 2
    breaker = service["deployment_circuit_breaker"][0]
    assert breaker == {"enable": True, "rollback": True}
    assert service["network_configuration"][0]["assign_public_ip"] is False
    api = ecs.locals["processes"]["api"]
    assert (api["cpu"], api["memory"]) == (1024, 2048)


def test_relay_and_worker_run_as_their_own_services_and_migrations_as_a_task() -> None:
    ecs = load_module("ecs")
    background = ecs.resource("aws_ecs_service", "background")
    assert background["for_each"] == {
        "relay": "${var.relay_desired_count}",
        "worker": "${var.worker_desired_count}",
    }
    assert load_root().variables["relay_desired_count"]["default"] >= 1
    assert load_root().variables["worker_desired_count"]["default"] >= 1
    assert background["deployment_circuit_breaker"][0]["rollback"] is True
    processes = ecs.locals["processes"]
    assert processes["migrate"]["command"] == ["python", "-m", "app", "migrate"]
    assert ecs.locals["base_environment"]["COGNIS_RELAY_IN_API"] == "false"


def test_load_balancer_health_checks_ready_over_https_only() -> None:
    ecs = load_module("ecs")
    group = ecs.resource("aws_lb_target_group", "api")
    assert group["health_check"][0]["path"] == "/ready"
    assert group["health_check"][0]["matcher"] == "200"
    listeners = ecs.resources["aws_lb_listener"]
    assert set(listeners) == {"https"}
    assert listeners["https"]["port"] == 443
    assert listeners["https"]["protocol"] == "HTTPS"
    assert "TLS13-1-2" in listeners["https"]["ssl_policy"]
    assert ecs.resource("aws_lb", "this")["drop_invalid_header_fields"] is True


def test_task_definitions_use_secrets_manager_and_awslogs() -> None:
    ecs = load_module("ecs")
    for name in ("process", "opensearch_bootstrap"):
        definition = ecs.resource("aws_ecs_task_definition", name)["container_definitions"]
        assert 'logDriver = "awslogs"' in definition
        assert "readonlyRootFilesystem = true" in definition
    secrets = {s["name"]: s["valueFrom"] for s in ecs.locals["secrets"]}
    assert secrets["DB_PASSWORD"].endswith(":password::")
    assert "COGNIS_OPENSEARCH_PASSWORD" in secrets and "COGNIS_API_KEY_HASHES" in secrets
    assert not set(secrets) & set(ecs.locals["base_environment"])


def test_each_process_logs_in_to_postgres_as_its_own_role() -> None:
    ecs = load_module("ecs")
    assert ecs.locals["process_login"] == {"api": "app", "relay": "worker", "worker": "worker"}
    assert ecs.resources["random_password"]["db_login"]["for_each"] == '${toset(["app", "worker"])}'
    secret = ecs.resource("aws_secretsmanager_secret_version", "db_login")["secret_string"]
    assert 'username = "cognis_${each.key}"' in secret
    logins = ecs.resource("aws_ecs_task_definition", "db_logins")["container_definitions"]
    assert "local.db_logins" in logins and 'logDriver = "awslogs"' in logins
    for role in ("cognis_app", "cognis_worker", "cognis_rw", "cognis_background"):
        assert role in ecs.locals["db_logins"]


def test_task_environment_names_only_settings_the_service_reads() -> None:
    environment = load_module("ecs").locals["base_environment"]
    secrets = {s["name"] for s in load_module("ecs").locals["secrets"]}
    cognis = {k for k in set(environment) | secrets if k.startswith("COGNIS_")}
    unknown = cognis - _settings_env_names()
    assert not unknown, sorted(unknown)
    # The image's entrypoint builds COGNIS_DATABASE_URL (the one required setting) from these.
    assert {"DB_HOST", "DB_PORT", "DB_NAME"} <= set(environment)
    assert {"DB_USERNAME", "DB_PASSWORD"} <= secrets
    required = {"COGNIS_" + n.upper() for n, f in SETTING_FIELDS.items() if f.is_required()}
    assert required == {"COGNIS_DATABASE_URL"}, "a new required setting needs a task variable"


# ---------------------------------------------------------------- Redis, logs, alarms


def test_redis_is_encrypted_with_auth_and_failover() -> None:
    group = load_module("redis").resource("aws_elasticache_replication_group", "this")
    assert group["at_rest_encryption_enabled"] is True
    assert group["transit_encryption_enabled"] is True
    assert "auth_token" in group
    assert group["automatic_failover_enabled"] is True
    assert group["num_cache_clusters"] >= 2


def test_retrieval_log_line_becomes_a_latency_metric() -> None:
    monitoring = load_module("monitoring")
    metric_filter = monitoring.resource("aws_cloudwatch_log_metric_filter", "retrieval_duration")
    assert '$.event = "memory_retrieval"' in metric_filter["pattern"]
    assert metric_filter["metric_transformation"][0]["value"] == "$.duration_ms"
    # The service logs exactly that event with that field.
    pipeline = (TERRAFORM.parent / "app" / "retrieval" / "pipeline.py").read_text()
    assert re.search(r'"memory_retrieval",(?s:.){0,200}duration_ms=', pipeline)
    wired = load_root().modules["monitoring"]["api_log_group_name"]
    assert wired == "${module.ecs.api_log_group_name}"


def test_alarms_on_retrieval_p95_and_opensearch_cpu_go_to_sns() -> None:
    monitoring = load_module("monitoring")
    alarms = monitoring.resources["aws_cloudwatch_metric_alarm"]
    p95 = alarms["retrieval_p95"]
    assert p95["extended_statistic"] == "p95"
    assert monitoring.resolve(p95["threshold"]) == 500
    assert p95["comparison_operator"] == "GreaterThanThreshold"
    cpu = alarms["opensearch_cpu"]
    assert (cpu["namespace"], cpu["metric_name"]) == ("AWS/ES", "CPUUtilization")
    assert monitoring.resolve(cpu["threshold"]) == 80
    for name, alarm in alarms.items():
        assert alarm["alarm_actions"] == ["${aws_sns_topic.alarms.arn}"], name
    assert "alarms" in monitoring.resources["aws_sns_topic"]


# ---------------------------------------------------------------- network and encryption


def _ingress_rules() -> list[tuple[str, dict]]:
    rules = []
    for module in all_modules():
        for name, body in module.resources.get("aws_vpc_security_group_ingress_rule", {}).items():
            rules.append((f"{module.path.name}.{name}", body))
        for name, body in module.resources.get("aws_security_group", {}).items():
            for rule in body.get("ingress", []):
                rules.append((f"{module.path.name}.{name}.inline", rule))
    return rules


def test_only_the_load_balancer_443_is_open_to_addresses_outside_the_vpc() -> None:
    network = load_module("network")
    open_rules = []
    for name, rule in _ingress_rules():
        if "cidr_ipv4" in rule or "cidr_blocks" in rule or "cidr_ipv6" in rule:
            open_rules.append(name)
            assert (rule["from_port"], rule["to_port"]) == (443, 443), name
            assert rule["security_group_id"] == "${aws_security_group.alb.id}", name
        else:
            assert "referenced_security_group_id" in rule, name
    assert open_rules == ["network.alb_https"]
    alb = network.resource("aws_vpc_security_group_ingress_rule", "alb_https")
    assert (alb["for_each"], alb["cidr_ipv4"]) == (
        "${toset(var.alb_ingress_cidrs)}",
        "${each.value}",
    )


@pytest.mark.parametrize(
    ("store", "port"), [("aurora", 5432), ("opensearch", 443), ("redis", 6379)]
)
def test_stores_accept_only_the_tasks_on_their_port(store: str, port: int) -> None:
    network = load_module("network")
    rule = network.resource("aws_vpc_security_group_ingress_rule", f"{store}_from_app")
    assert rule["security_group_id"] == f"${{aws_security_group.{store}.id}}"
    assert rule["referenced_security_group_id"] == "${aws_security_group.app.id}"
    assert (rule["from_port"], rule["to_port"]) == (port, port)


def test_customer_managed_key_rotates_and_log_groups_use_it() -> None:
    key = load_root().resource("aws_kms_key", "this")
    assert key["enable_key_rotation"] is True
    for module in all_modules():
        for name, group in module.resources.get("aws_cloudwatch_log_group", {}).items():
            assert group.get("kms_key_id"), f"{module.path.name}.{name}"


def test_checkov_skips_carry_a_reason() -> None:
    for tf in TERRAFORM.rglob("*.tf"):
        for line in tf.read_text().splitlines():
            if "checkov:skip" in line:
                reason = re.search(r"checkov:skip=CKV2?_[A-Z0-9]+_\d+:\S.{20,}", line)
                assert reason, f"{tf}: {line}"


def test_an_external_embedding_endpoint_is_optional_and_its_key_a_secret() -> None:
    root = load_root()
    for name in ("embedding_http_url", "embedding_http_model", "embedding_http_api_key_secret_arn"):
        assert root.variables[name]["default"] is None, name
    ecs = load_module("ecs")
    assert "COGNIS_EMBEDDING_BACKEND" not in ecs.locals["base_environment"]
    embedding = ecs.locals["embedding_environment"]
    assert "COGNIS_EMBEDDING_HTTP_URL" in embedding and '"http"' in embedding
    secrets = ecs.locals["embedding_secrets"]
    assert "COGNIS_EMBEDDING_HTTP_API_KEY" in secrets and "api_key_secret_arn" in secrets
    assert {"COGNIS_EMBEDDING_BACKEND", "COGNIS_EMBEDDING_HTTP_URL"} <= _settings_env_names()
    assert "COGNIS_EMBEDDING_HTTP_API_KEY" in _settings_env_names()
