output "endpoint" {
  description = "Domain endpoint (HTTPS, inside the VPC)."
  value       = aws_opensearch_domain.this.endpoint
}

output "domain_name" {
  description = "Domain name (CloudWatch dimension)."
  value       = aws_opensearch_domain.this.domain_name
}

output "domain_arn" {
  description = "Domain ARN."
  value       = aws_opensearch_domain.this.arn
}

output "master_username" {
  description = "Fine-grained access master user."
  value       = var.master_username
}

output "master_password_secret_arn" {
  description = "Secret holding the master password."
  value       = aws_secretsmanager_secret.master.arn
}

output "app_username" {
  description = "Internal user the service connects as."
  value       = var.app_username
}

output "app_password_secret_arn" {
  description = "Secret holding the service user's password."
  value       = aws_secretsmanager_secret.app.arn
}

output "snapshot_bucket" {
  description = "S3 bucket for manual snapshots."
  value       = aws_s3_bucket.snapshots.bucket
}

output "snapshot_role_arn" {
  description = "Role OpenSearch assumes to write snapshots."
  value       = aws_iam_role.snapshot.arn
}
