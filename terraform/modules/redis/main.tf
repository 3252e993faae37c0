# ElastiCache Redis for caching repeated queries: two nodes in two AZs with automatic failover,
# TLS in transit, encrypted at rest, AUTH token in Secrets Manager.

resource "random_password" "auth" {
  length  = 48
  special = false
}

resource "aws_secretsmanager_secret" "auth" {
  #checkov:skip=CKV2_AWS_57:Rotated with ModifyReplicationGroup's auth-token-update-strategy ROTATE (docs/deployment.md), not by a rotation Lambda.
  name                    = "${var.name}/redis/auth"
  description             = "ElastiCache Redis AUTH token"
  kms_key_id              = var.kms_key_arn
  recovery_window_in_days = 7
}

resource "aws_secretsmanager_secret_version" "auth" {
  secret_id     = aws_secretsmanager_secret.auth.id
  secret_string = random_password.auth.result
}

resource "aws_elasticache_subnet_group" "this" {
  name       = var.name
  subnet_ids = var.subnet_ids
}

resource "aws_elasticache_replication_group" "this" {
  replication_group_id = var.name
  description          = "Cognis query cache"
  engine               = "redis"
  engine_version       = var.engine_version
  node_type            = var.node_type
  port                 = 6379
  num_cache_clusters   = 2

  automatic_failover_enabled = true
  multi_az_enabled           = true
  subnet_group_name          = aws_elasticache_subnet_group.this.name
  security_group_ids         = [var.security_group_id]

  at_rest_encryption_enabled = true
  kms_key_id                 = var.kms_key_arn
  transit_encryption_enabled = true
  auth_token                 = random_password.auth.result
  auth_token_update_strategy = "ROTATE"

  auto_minor_version_upgrade = true
  snapshot_retention_limit   = 1
  apply_immediately          = false
}
