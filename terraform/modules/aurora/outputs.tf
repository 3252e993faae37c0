output "endpoint" {
  description = "Writer endpoint."
  value       = aws_rds_cluster.this.endpoint
}

output "reader_endpoint" {
  description = "Reader endpoint."
  value       = aws_rds_cluster.this.reader_endpoint
}

output "port" {
  description = "PostgreSQL port."
  value       = aws_rds_cluster.this.port
}

output "database_name" {
  description = "Database name."
  value       = aws_rds_cluster.this.database_name
}

output "cluster_identifier" {
  description = "Cluster identifier."
  value       = aws_rds_cluster.this.cluster_identifier
}

output "master_user_secret_arn" {
  description = "Secrets Manager secret (JSON with username and password) managed by RDS."
  value       = aws_rds_cluster.this.master_user_secret[0].secret_arn
}
