output "alb_dns_name" {
  description = "Load balancer DNS name: point the certificate's host name at it (CNAME or alias)."
  value       = module.ecs.alb_dns_name
}

output "cluster_name" {
  description = "ECS cluster."
  value       = module.ecs.cluster_name
}

output "service_names" {
  description = "ECS services (api, relay, worker)."
  value       = module.ecs.service_names
}

output "task_definitions" {
  description = "Task definition ARNs: api, relay, worker, migrate, opensearch-bootstrap."
  value       = module.ecs.task_definitions
}

output "run_task_network_configuration" {
  description = "Value for aws ecs run-task --network-configuration."
  value       = module.ecs.run_task_network_configuration
}

output "aurora_endpoint" {
  description = "Aurora writer endpoint."
  value       = module.aurora.endpoint
}

output "aurora_master_secret_arn" {
  description = "RDS-managed master secret (rotated by RDS)."
  value       = module.aurora.master_user_secret_arn
}

output "opensearch_endpoint" {
  description = "OpenSearch domain endpoint (VPC only)."
  value       = module.opensearch.endpoint
}

output "opensearch_snapshot_bucket" {
  description = "S3 bucket for manual OpenSearch snapshots."
  value       = module.opensearch.snapshot_bucket
}

output "opensearch_snapshot_role_arn" {
  description = "Role to register as the snapshot repository's role_arn."
  value       = module.opensearch.snapshot_role_arn
}

output "redis_endpoint" {
  description = "ElastiCache primary endpoint (TLS + AUTH)."
  value       = module.redis.primary_endpoint
}

output "redis_auth_secret_arn" {
  description = "Secret holding the Redis AUTH token."
  value       = module.redis.auth_secret_arn
}

output "alarm_topic_arn" {
  description = "SNS topic of the alarms."
  value       = module.monitoring.alarm_topic_arn
}
