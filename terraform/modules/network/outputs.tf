output "alb_security_group_id" {
  description = "Load balancer security group."
  value       = aws_security_group.alb.id
}

output "app_security_group_id" {
  description = "ECS tasks security group."
  value       = aws_security_group.app.id
}

output "aurora_security_group_id" {
  description = "Aurora security group."
  value       = aws_security_group.aurora.id
}

output "opensearch_security_group_id" {
  description = "OpenSearch security group."
  value       = aws_security_group.opensearch.id
}

output "redis_security_group_id" {
  description = "Redis security group."
  value       = aws_security_group.redis.id
}
