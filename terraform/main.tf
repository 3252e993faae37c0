# Cognis Memory on AWS, pattern B: Aurora PostgreSQL + pgvector (system of record), Amazon
# OpenSearch Service (BM25), ECS Fargate (API, outbox relay, ingestion worker, migration task)
# behind an ALB, ElastiCache Redis (query cache), CloudWatch alarms to SNS.
# Order of a first deployment: README.md and docs/deployment.md.

data "aws_caller_identity" "current" {}
data "aws_partition" "current" {}

locals {
  name       = "cognis-${var.environment}"
  account_id = data.aws_caller_identity.current.account_id
  partition  = data.aws_partition.current.partition
}

# One customer-managed key for everything this deployment stores: Aurora, OpenSearch, Redis,
# Secrets Manager, CloudWatch Logs, SNS and the snapshot bucket.
resource "aws_kms_key" "this" {
  description             = "${local.name}: data at rest"
  enable_key_rotation     = true
  deletion_window_in_days = 30
  policy                  = data.aws_iam_policy_document.kms.json
}

resource "aws_kms_alias" "this" {
  name          = "alias/${local.name}"
  target_key_id = aws_kms_key.this.key_id
}

data "aws_iam_policy_document" "kms" {
  #checkov:skip=CKV_AWS_109:A key policy's Resource "*" means this key only; the account root statement is AWS's default key policy.
  #checkov:skip=CKV_AWS_111:A key policy's Resource "*" means this key only.
  #checkov:skip=CKV_AWS_356:A key policy's Resource "*" means this key only.
  statement {
    sid       = "AccountAdministers"
    actions   = ["kms:*"]
    resources = ["*"]
    principals {
      type        = "AWS"
      identifiers = ["arn:${local.partition}:iam::${local.account_id}:root"]
    }
  }

  statement {
    sid       = "CloudWatchLogsEncrypt"
    actions   = ["kms:Encrypt*", "kms:Decrypt*", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:Describe*"]
    resources = ["*"]
    principals {
      type        = "Service"
      identifiers = ["logs.${var.region}.amazonaws.com"]
    }
    condition {
      test     = "ArnLike"
      variable = "kms:EncryptionContext:aws:logs:arn"
      values   = ["arn:${local.partition}:logs:${var.region}:${local.account_id}:log-group:*"]
    }
  }

  statement {
    sid       = "CloudWatchAlarmsPublishToEncryptedTopic"
    actions   = ["kms:Decrypt", "kms:GenerateDataKey*"]
    resources = ["*"]
    principals {
      type        = "Service"
      identifiers = ["cloudwatch.amazonaws.com"]
    }
  }
}

module "network" {
  source = "./modules/network"

  name              = local.name
  vpc_id            = var.vpc_id
  alb_ingress_cidrs = var.alb_ingress_cidrs
}

module "aurora" {
  source = "./modules/aurora"

  name              = local.name
  subnet_ids        = var.private_subnet_ids
  security_group_id = module.network.aurora_security_group_id
  kms_key_arn       = aws_kms_key.this.arn
  engine_version    = var.aurora_engine_version
  min_acu           = var.aurora_min_acu
  max_acu           = var.aurora_max_acu
  instance_count    = 2
}

module "opensearch" {
  source = "./modules/opensearch"

  name               = local.name
  region             = var.region
  account_id         = local.account_id
  partition          = local.partition
  subnet_ids         = slice(var.private_subnet_ids, 0, 3)
  security_group_id  = module.network.opensearch_security_group_id
  kms_key_arn        = aws_kms_key.this.arn
  engine_version     = var.opensearch_engine_version
  instance_type      = var.opensearch_instance_type
  instance_count     = 3
  log_retention_days = var.log_retention_days
}

module "redis" {
  source = "./modules/redis"

  name              = local.name
  subnet_ids        = var.private_subnet_ids
  security_group_id = module.network.redis_security_group_id
  kms_key_arn       = aws_kms_key.this.arn
  node_type         = var.redis_node_type
}

module "ecs" {
  source = "./modules/ecs"

  name               = local.name
  region             = var.region
  vpc_id             = var.vpc_id
  private_subnet_ids = var.private_subnet_ids
  alb_subnet_ids     = var.public_subnet_ids
  alb_internal       = var.alb_internal
  alb_security_group = module.network.alb_security_group_id
  app_security_group = module.network.app_security_group_id
  certificate_arn    = var.certificate_arn
  kms_key_arn        = aws_kms_key.this.arn
  log_retention_days = var.log_retention_days
  image              = var.image
  api_key_hashes     = var.api_key_hashes

  api_desired_count    = var.api_desired_count
  relay_desired_count  = var.relay_desired_count
  worker_desired_count = var.worker_desired_count
  extra_environment    = var.extra_environment

  embedder_desired_count = var.embedder_desired_count
  embedder_cpu           = var.embedder_cpu
  embedder_memory        = var.embedder_memory

  embedding_http = {
    url                = var.embedding_http_url
    model              = var.embedding_http_model
    api_key_secret_arn = var.embedding_http_api_key_secret_arn
  }

  database = {
    host        = module.aurora.endpoint
    reader_host = module.aurora.reader_endpoint
    port        = module.aurora.port
    name        = module.aurora.database_name
    secret_arn  = module.aurora.master_user_secret_arn
  }
  opensearch = {
    url               = "https://${module.opensearch.endpoint}"
    app_username      = module.opensearch.app_username
    app_secret_arn    = module.opensearch.app_password_secret_arn
    master_username   = module.opensearch.master_username
    master_secret_arn = module.opensearch.master_password_secret_arn
    app_index_pattern = "cognis-memories*"
    # One copy of every shard on another node (and zone) of the three: a node lost loses no
    # part of the BM25 index.
    replicas = 1
  }
}

module "monitoring" {
  source = "./modules/monitoring"

  name                       = local.name
  account_id                 = local.account_id
  kms_key_arn                = aws_kms_key.this.arn
  api_log_group_name         = module.ecs.api_log_group_name
  opensearch_domain_name     = module.opensearch.domain_name
  alb_arn_suffix             = module.ecs.alb_arn_suffix
  target_group_arn_suffix    = module.ecs.target_group_arn_suffix
  alarm_email                = var.alarm_email
  retrieval_p95_threshold_ms = var.retrieval_p95_threshold_ms
  opensearch_cpu_threshold   = var.opensearch_cpu_threshold
}
