output "primary_endpoint" {
  description = "Primary endpoint (TLS, AUTH)."
  value       = aws_elasticache_replication_group.this.primary_endpoint_address
}

output "auth_secret_arn" {
  description = "Secret holding the AUTH token."
  value       = aws_secretsmanager_secret.auth.arn
}
