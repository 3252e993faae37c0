# ECS Fargate: the API behind an ALB, the outbox relay and the ingestion worker as services of
# their own, and one-off task definitions for migrations and the OpenSearch security bootstrap.
# One image, the same entry points as a local install (python -m app serve|relay|worker|migrate).

locals {
  app_port      = 8000
  embedder_port = 8080
  # The model service: one ECS service (embed-serve) holds the embedding model and schedules
  # every task's model work; the others reach it by its Cloud Map name. An external endpoint
  # (var.embedding_http.url) replaces it.
  run_embedder = var.embedding_http.url == null
  embedder_url = "http://embedder.${var.name}.internal:${local.embedder_port}/v1"

  # Every COGNIS_* name here is a field of app.config.Settings (tests/deploy checks it). DB_*
  # parts are joined into COGNIS_DATABASE_URL by the image's entrypoint (URL-quoted password),
  # and with DB_READER_HOST (Aurora's reader endpoint) into COGNIS_READ_DATABASE_URL.
  base_environment = {
    COGNIS_HOST                 = "0.0.0.0"
    COGNIS_PORT                 = tostring(local.app_port)
    COGNIS_LOG_JSON             = "true"
    COGNIS_OPENSEARCH_URL       = var.opensearch.url
    COGNIS_OPENSEARCH_USERNAME  = var.opensearch.app_username
    COGNIS_OPENSEARCH_REPLICAS  = tostring(var.opensearch.replicas)
    COGNIS_RELAY_IN_API         = "false"
    COGNIS_INGEST_WORKER_IN_API = "false"
    DB_HOST                     = var.database.host
    DB_PORT                     = tostring(var.database.port)
    DB_NAME                     = var.database.name
    DB_READER_HOST              = var.database.reader_host
    DB_SSL                      = "require"
    HF_HOME                     = "/tmp/hf"
  }
  # Every task embeds over HTTP, through the model service or an external OpenAI-compatible
  # endpoint, never with a model of its own (docs/embedding.md).
  embedding_environment = merge(
    {
      COGNIS_EMBEDDING_BACKEND  = "http"
      COGNIS_EMBEDDING_HTTP_URL = local.run_embedder ? local.embedder_url : var.embedding_http.url
    },
    var.embedding_http.model == null ? {} : { COGNIS_EMBEDDING_HTTP_MODEL = var.embedding_http.model },
  )
  environment = merge(local.base_environment, local.embedding_environment, var.extra_environment)

  secrets = [
    { name = "DB_USERNAME", valueFrom = "${var.database.secret_arn}:username::" },
    { name = "DB_PASSWORD", valueFrom = "${var.database.secret_arn}:password::" },
    { name = "COGNIS_OPENSEARCH_PASSWORD", valueFrom = var.opensearch.app_secret_arn },
    { name = "COGNIS_API_KEY_HASHES", valueFrom = aws_secretsmanager_secret.api_key_hashes.arn },
  ]
  # The embedding endpoint's bearer key: a secret made outside Terraform, so the key never enters
  # the state; only its ARN is configured.
  embedding_secrets = var.embedding_http.api_key_secret_arn == null ? [] : [
    { name = "COGNIS_EMBEDDING_HTTP_API_KEY", valueFrom = var.embedding_http.api_key_secret_arn },
  ]

  # Each process logs in to Postgres as its own role (docs/tenants.md): the
  # API as cognis_app (row-level security keeps it in each request's tenant), the relay and the
  # worker as cognis_worker (claims work of every tenant), migrations as the master user (owner).
  process_login = { api = "app", relay = "worker", worker = "worker" }
  # The model service opens no database: only the embedding key, when there is one.
  process_secrets = {
    for name, _ in local.processes : name => name == "embedder" ? local.embedding_secrets : concat(
      contains(keys(local.process_login), name) ? [
        { name = "DB_USERNAME", valueFrom = "${aws_secretsmanager_secret.db_login[local.process_login[name]].arn}:username::" },
        { name = "DB_PASSWORD", valueFrom = "${aws_secretsmanager_secret.db_login[local.process_login[name]].arn}:password::" },
      ] : [for secret in local.secrets : secret if startswith(secret.name, "DB_")],
      # The API's admin routes read every tenant's tenants and api_keys rows, which row-level
      # security shows the worker role only (migration 0042): its login too, as
      # COGNIS_WORKER_DATABASE_URL (the image's entrypoint builds it).
      name == "api" ? [
        { name = "WORKER_DB_USERNAME", valueFrom = "${aws_secretsmanager_secret.db_login["worker"].arn}:username::" },
        { name = "WORKER_DB_PASSWORD", valueFrom = "${aws_secretsmanager_secret.db_login["worker"].arn}:password::" },
      ] : [],
      [for secret in local.secrets : secret if !startswith(secret.name, "DB_")],
      local.embedding_secrets,
    )
  }

  # One-off: the logins above, in the groups migration 0007 grants (as scripts/service-roles.sql
  # does locally), with the master credentials. Idempotent: rerun it after rotating a password.
  db_logins = <<-PY
    import asyncio, os, asyncpg
    e = os.environ
    async def main():
        c = await asyncpg.connect(host=e["DB_HOST"], port=int(e["DB_PORT"]), database=e["DB_NAME"],
                                  user=e["DB_USERNAME"], password=e["DB_PASSWORD"], ssl=e["DB_SSL"])
        for role in ("cognis_rw", "cognis_background", "cognis_app", "cognis_worker"):
            if not await c.fetchval("SELECT 1 FROM pg_roles WHERE rolname = $1", role):
                await c.execute("CREATE ROLE %s NOLOGIN" % role)
        await c.execute("GRANT cognis_rw TO cognis_background")
        for role, group, secret in (("cognis_app", "cognis_rw", "APP_DB_PASSWORD"),
                                    ("cognis_worker", "cognis_background", "WORKER_DB_PASSWORD")):
            password = await c.fetchval("SELECT quote_literal($1)", e[secret])
            await c.execute("ALTER ROLE %s LOGIN PASSWORD %s" % (role, password))
            await c.execute("GRANT %s TO %s" % (group, role))
            print("login", role, "in", group, flush=True)
        await c.close()
    asyncio.run(main())
  PY

  # The only writable path of a read-only root file system.
  tmp_mount = [{ sourceVolume = "tmp", containerPath = "/tmp", readOnly = false }]

  processes = {
    api     = { command = ["python", "-m", "app", "serve"], cpu = 1024, memory = 2048 }
    relay   = { command = ["python", "-m", "app", "relay"], cpu = 256, memory = 512 }
    worker  = { command = ["python", "-m", "app", "worker"], cpu = 1024, memory = 2048 }
    migrate = { command = ["python", "-m", "app", "migrate"], cpu = 512, memory = 1024 }
    # It computes (--backend): the shared environment names the http backend its callers use.
    embedder = {
      command = ["python", "-m", "app", "embed-serve", "--host", "0.0.0.0", "--port", tostring(local.embedder_port), "--backend", "torch"]
      cpu     = var.embedder_cpu
      memory  = var.embedder_memory
    }
  }

  # One-off: creates the service's OpenSearch role (its index pattern only), internal user and
  # role mapping (the user and the API task role as backend role) with the master credentials.
  opensearch_bootstrap = <<-PY
    import base64, json, os, urllib.request
    e = os.environ
    token = base64.b64encode((e["OS_MASTER_USER"] + ":" + e["OS_MASTER_PASSWORD"]).encode()).decode()
    def put(path, body):
        request = urllib.request.Request(
            e["OS_URL"] + "/_plugins/_security/api/" + path, data=json.dumps(body).encode(),
            method="PUT", headers={"Authorization": "Basic " + token, "Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as response:
            print(path, response.status, response.read().decode()[:300], flush=True)
    put("roles/cognis_app", {
        "cluster_permissions": ["cluster_monitor", "cluster_composite_ops"],
        "index_permissions": [
            {"index_patterns": [e["OS_INDEX_PATTERN"]], "allowed_actions": ["crud", "create_index", "manage"]},
            {"index_patterns": ["*"], "allowed_actions": ["indices:admin/analyze"]}]})
    put("internalusers/" + e["OS_APP_USER"], {"password": e["OS_APP_PASSWORD"]})
    put("rolesmapping/cognis_app", {"users": [e["OS_APP_USER"]], "backend_roles": [e["OS_BACKEND_ROLE"]]})
  PY
}

resource "aws_ecs_cluster" "this" {
  name = var.name

  setting {
    name  = "containerInsights"
    value = "enabled"
  }
}

resource "aws_cloudwatch_log_group" "this" {
  for_each = toset(["api", "relay", "worker", "embedder", "migrate", "opensearch-bootstrap", "db-logins"])

  name              = "/ecs/${var.name}/${each.key}"
  retention_in_days = var.log_retention_days
  kms_key_id        = var.kms_key_arn
}

resource "aws_secretsmanager_secret" "api_key_hashes" {
  #checkov:skip=CKV2_AWS_57:Holds SHA-256 digests of API keys, changed by updating var.api_key_hashes (docs/deployment.md), not by a rotation Lambda.
  name                    = "${var.name}/api-key-hashes"
  description             = "COGNIS_API_KEY_HASHES: SHA-256 digests of accepted API keys"
  kms_key_id              = var.kms_key_arn
  recovery_window_in_days = 7
}

resource "aws_secretsmanager_secret_version" "api_key_hashes" {
  secret_id     = aws_secretsmanager_secret.api_key_hashes.id
  secret_string = var.api_key_hashes
}

# The service's Postgres logins (made by the db-logins one-off task).
resource "random_password" "db_login" {
  for_each = toset(["app", "worker"])

  length  = 32
  special = false
}

resource "aws_secretsmanager_secret" "db_login" {
  #checkov:skip=CKV2_AWS_57:Rotated by replacing random_password.db_login, terraform apply, then the db-logins task (docs/deployment.md); no rotation Lambda.
  for_each = random_password.db_login

  name                    = "${var.name}/db-${each.key}"
  description             = "Postgres login cognis_${each.key} of the service"
  kms_key_id              = var.kms_key_arn
  recovery_window_in_days = 7
}

resource "aws_secretsmanager_secret_version" "db_login" {
  for_each = random_password.db_login

  secret_id     = aws_secretsmanager_secret.db_login[each.key].id
  secret_string = jsonencode({ username = "cognis_${each.key}", password = each.value.result })
}

# ---------------------------------------------------------------- IAM

data "aws_iam_policy_document" "tasks_assume" {
  statement {
    actions = ["sts:AssumeRole"]
    principals {
      type        = "Service"
      identifiers = ["ecs-tasks.amazonaws.com"]
    }
  }
}

# Used by the ECS agent: pull the image, write logs, resolve the task definitions' secrets.
resource "aws_iam_role" "execution" {
  name               = "${var.name}-ecs-execution"
  assume_role_policy = data.aws_iam_policy_document.tasks_assume.json
}

resource "aws_iam_role_policy_attachment" "execution" {
  role       = aws_iam_role.execution.name
  policy_arn = "arn:aws:iam::aws:policy/service-role/AmazonECSTaskExecutionRolePolicy"
}

data "aws_iam_policy_document" "execution_secrets" {
  statement {
    actions = ["secretsmanager:GetSecretValue"]
    resources = concat(
      [
        var.database.secret_arn,
        var.opensearch.app_secret_arn,
        var.opensearch.master_secret_arn,
        aws_secretsmanager_secret.api_key_hashes.arn,
      ],
      [for secret in aws_secretsmanager_secret.db_login : secret.arn],
      [for secret in local.embedding_secrets : secret.valueFrom],
    )
  }

  statement {
    actions   = ["kms:Decrypt"]
    resources = [var.kms_key_arn]
  }
}

resource "aws_iam_role_policy" "execution_secrets" {
  name   = "secrets"
  role   = aws_iam_role.execution.id
  policy = data.aws_iam_policy_document.execution_secrets.json
}

# The application's identity. It needs no AWS API; OpenSearch maps it as a backend role of the
# service's fine-grained-access role.
resource "aws_iam_role" "task" {
  name               = "${var.name}-ecs-task"
  assume_role_policy = data.aws_iam_policy_document.tasks_assume.json
}

# ---------------------------------------------------------------- load balancer

resource "aws_lb" "this" {
  #checkov:skip=CKV_AWS_91:Access logs need a bucket with the ELB account's write policy per region; enable with access_logs once one exists. Requests are also logged by the API.
  #checkov:skip=CKV2_AWS_28:WAF is an optional add-on (cost); the API requires an API key on every /v1 route.
  name                       = var.name
  internal                   = var.alb_internal
  load_balancer_type         = "application"
  subnets                    = var.alb_subnet_ids
  security_groups            = [var.alb_security_group]
  drop_invalid_header_fields = true
  enable_deletion_protection = true
  idle_timeout               = 60
}

resource "aws_lb_target_group" "api" {
  #checkov:skip=CKV_AWS_378:TLS ends at the load balancer; the hop to the task stays inside the VPC, limited by security groups to the ALB alone.
  name                 = "${var.name}-api"
  port                 = local.app_port
  protocol             = "HTTP"
  target_type          = "ip"
  vpc_id               = var.vpc_id
  deregistration_delay = 30

  health_check {
    path                = "/ready"
    matcher             = "200"
    interval            = 15
    timeout             = 5
    healthy_threshold   = 2
    unhealthy_threshold = 3
  }
}

resource "aws_lb_listener" "https" {
  load_balancer_arn = aws_lb.this.arn
  port              = 443
  protocol          = "HTTPS"
  ssl_policy        = "ELBSecurityPolicy-TLS13-1-2-2021-06"
  certificate_arn   = var.certificate_arn

  default_action {
    type             = "forward"
    target_group_arn = aws_lb_target_group.api.arn
  }
}

# ---------------------------------------------------------------- task definitions

resource "aws_ecs_task_definition" "process" {
  for_each = local.processes

  family                   = "${var.name}-${each.key}"
  requires_compatibilities = ["FARGATE"]
  network_mode             = "awsvpc"
  cpu                      = each.value.cpu
  memory                   = each.value.memory
  execution_role_arn       = aws_iam_role.execution.arn
  task_role_arn            = aws_iam_role.task.arn

  runtime_platform {
    operating_system_family = "LINUX"
    cpu_architecture        = "X86_64"
  }

  volume {
    name = "tmp"
  }

  container_definitions = jsonencode([
    {
      name                   = each.key
      image                  = var.image
      essential              = true
      command                = each.value.command
      readonlyRootFilesystem = true
      environment            = [for k, v in local.environment : { name = k, value = v }]
      secrets                = local.process_secrets[each.key]
      mountPoints            = local.tmp_mount
      portMappings = (
        each.key == "api" ? [{ containerPort = local.app_port, protocol = "tcp" }] :
        each.key == "embedder" ? [{ containerPort = local.embedder_port, protocol = "tcp" }] : []
      )
      healthCheck = contains(["api", "embedder"], each.key) ? {
        command     = ["CMD", "python", "-c", each.key == "api" ? "import urllib.request; urllib.request.urlopen('http://127.0.0.1:${local.app_port}/ready', timeout=4)" : "import urllib.request; urllib.request.urlopen('http://127.0.0.1:${local.embedder_port}/health', timeout=4)"]
        interval    = 15
        timeout     = 5
        retries     = 3
        startPeriod = 180
      } : null
      logConfiguration = {
        logDriver = "awslogs"
        options = {
          awslogs-group         = aws_cloudwatch_log_group.this[each.key].name
          awslogs-region        = var.region
          awslogs-stream-prefix = each.key
        }
      }
    }
  ])
}

resource "aws_ecs_task_definition" "opensearch_bootstrap" {
  family                   = "${var.name}-opensearch-bootstrap"
  requires_compatibilities = ["FARGATE"]
  network_mode             = "awsvpc"
  cpu                      = 256
  memory                   = 512
  execution_role_arn       = aws_iam_role.execution.arn
  task_role_arn            = aws_iam_role.task.arn

  runtime_platform {
    operating_system_family = "LINUX"
    cpu_architecture        = "X86_64"
  }

  container_definitions = jsonencode([
    {
      name                   = "opensearch-bootstrap"
      image                  = var.image
      essential              = true
      readonlyRootFilesystem = true
      command                = ["python", "-c", local.opensearch_bootstrap]
      environment = [
        { name = "OS_URL", value = var.opensearch.url },
        { name = "OS_MASTER_USER", value = var.opensearch.master_username },
        { name = "OS_APP_USER", value = var.opensearch.app_username },
        { name = "OS_INDEX_PATTERN", value = var.opensearch.app_index_pattern },
        { name = "OS_BACKEND_ROLE", value = aws_iam_role.task.arn },
      ]
      secrets = [
        { name = "OS_MASTER_PASSWORD", valueFrom = var.opensearch.master_secret_arn },
        { name = "OS_APP_PASSWORD", valueFrom = var.opensearch.app_secret_arn },
      ]
      logConfiguration = {
        logDriver = "awslogs"
        options = {
          awslogs-group         = aws_cloudwatch_log_group.this["opensearch-bootstrap"].name
          awslogs-region        = var.region
          awslogs-stream-prefix = "bootstrap"
        }
      }
    }
  ])
}

resource "aws_ecs_task_definition" "db_logins" {
  family                   = "${var.name}-db-logins"
  requires_compatibilities = ["FARGATE"]
  network_mode             = "awsvpc"
  cpu                      = 256
  memory                   = 512
  execution_role_arn       = aws_iam_role.execution.arn
  task_role_arn            = aws_iam_role.task.arn

  runtime_platform {
    operating_system_family = "LINUX"
    cpu_architecture        = "X86_64"
  }

  container_definitions = jsonencode([
    {
      name                   = "db-logins"
      image                  = var.image
      essential              = true
      readonlyRootFilesystem = true
      command                = ["python", "-c", local.db_logins]
      environment            = [for k, v in local.base_environment : { name = k, value = v } if startswith(k, "DB_")]
      secrets = concat(
        [for secret in local.secrets : secret if startswith(secret.name, "DB_")],
        [
          { name = "APP_DB_PASSWORD", valueFrom = "${aws_secretsmanager_secret.db_login["app"].arn}:password::" },
          { name = "WORKER_DB_PASSWORD", valueFrom = "${aws_secretsmanager_secret.db_login["worker"].arn}:password::" },
        ],
      )
      logConfiguration = {
        logDriver = "awslogs"
        options = {
          awslogs-group         = aws_cloudwatch_log_group.this["db-logins"].name
          awslogs-region        = var.region
          awslogs-stream-prefix = "db-logins"
        }
      }
    }
  ])
}

# ---------------------------------------------------------------- services

resource "aws_ecs_service" "api" {
  name                              = "${var.name}-api"
  cluster                           = aws_ecs_cluster.this.id
  task_definition                   = aws_ecs_task_definition.process["api"].arn
  desired_count                     = var.api_desired_count
  launch_type                       = "FARGATE"
  platform_version                  = "LATEST"
  enable_execute_command            = false
  propagate_tags                    = "SERVICE"
  health_check_grace_period_seconds = 300
  # Model loading takes a minute or two: keep the old tasks until the new ones are ready.
  deployment_minimum_healthy_percent = 100
  deployment_maximum_percent         = 200

  deployment_circuit_breaker {
    enable   = true
    rollback = true
  }

  network_configuration {
    subnets          = var.private_subnet_ids
    security_groups  = [var.app_security_group]
    assign_public_ip = false
  }

  load_balancer {
    target_group_arn = aws_lb_target_group.api.arn
    container_name   = "api"
    container_port   = local.app_port
  }

  depends_on = [aws_lb_listener.https]
}

resource "aws_ecs_service" "background" {
  for_each = {
    relay  = var.relay_desired_count
    worker = var.worker_desired_count
  }

  name                               = "${var.name}-${each.key}"
  cluster                            = aws_ecs_cluster.this.id
  task_definition                    = aws_ecs_task_definition.process[each.key].arn
  desired_count                      = each.value
  launch_type                        = "FARGATE"
  platform_version                   = "LATEST"
  enable_execute_command             = false
  propagate_tags                     = "SERVICE"
  deployment_minimum_healthy_percent = 100
  deployment_maximum_percent         = 200

  deployment_circuit_breaker {
    enable   = true
    rollback = true
  }

  network_configuration {
    subnets          = var.private_subnet_ids
    security_groups  = [var.app_security_group]
    assign_public_ip = false
  }
}

# ---------------------------------------------------------------- model service

resource "aws_service_discovery_private_dns_namespace" "this" {
  count = local.run_embedder ? 1 : 0

  name        = "${var.name}.internal"
  description = "Cognis tasks find the model service here"
  vpc         = var.vpc_id
}

resource "aws_service_discovery_service" "embedder" {
  count = local.run_embedder ? 1 : 0

  name = "embedder"

  dns_config {
    namespace_id   = aws_service_discovery_private_dns_namespace.this[0].id
    routing_policy = "MULTIVALUE"

    dns_records {
      ttl  = 10
      type = "A"
    }
  }

  health_check_custom_config {
    failure_threshold = 1
  }
}

# One model per task of this service, and one scheduler for the API, relay and worker tasks'
# model work (queries first, then writes, then imports, then background work).
resource "aws_ecs_service" "embedder" {
  count = local.run_embedder ? 1 : 0

  name                               = "${var.name}-embedder"
  cluster                            = aws_ecs_cluster.this.id
  task_definition                    = aws_ecs_task_definition.process["embedder"].arn
  desired_count                      = var.embedder_desired_count
  launch_type                        = "FARGATE"
  platform_version                   = "LATEST"
  enable_execute_command             = false
  propagate_tags                     = "SERVICE"
  deployment_minimum_healthy_percent = 100
  deployment_maximum_percent         = 200

  deployment_circuit_breaker {
    enable   = true
    rollback = true
  }

  network_configuration {
    subnets          = var.private_subnet_ids
    security_groups  = [var.app_security_group]
    assign_public_ip = false
  }

  service_registries {
    registry_arn = aws_service_discovery_service.embedder[0].arn
  }
}
