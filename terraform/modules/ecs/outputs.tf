output "cluster_name" {
  description = "ECS cluster."
  value       = aws_ecs_cluster.this.name
}

output "alb_dns_name" {
  description = "Load balancer DNS name (point the certificate's host name at it)."
  value       = aws_lb.this.dns_name
}

output "alb_arn_suffix" {
  description = "Load balancer ARN suffix (CloudWatch dimension)."
  value       = aws_lb.this.arn_suffix
}

output "target_group_arn_suffix" {
  description = "Target group ARN suffix (CloudWatch dimension)."
  value       = aws_lb_target_group.api.arn_suffix
}

output "api_log_group_name" {
  description = "Log group of the API (memory_retrieval lines)."
  value       = aws_cloudwatch_log_group.this["api"].name
}

output "task_definitions" {
  description = "Task definition ARNs by process (api, relay, worker, migrate, opensearch-bootstrap)."
  value = merge(
    { for k, td in aws_ecs_task_definition.process : k => td.arn },
    { "opensearch-bootstrap" = aws_ecs_task_definition.opensearch_bootstrap.arn },
  )
}

output "service_names" {
  description = "ECS services."
  value = {
    api    = aws_ecs_service.api.name
    relay  = aws_ecs_service.background["relay"].name
    worker = aws_ecs_service.background["worker"].name
  }
}

output "run_task_network_configuration" {
  description = "--network-configuration for aws ecs run-task (migrations, bootstrap, reindex)."
  value = jsonencode({
    awsvpcConfiguration = {
      subnets        = var.private_subnet_ids
      securityGroups = [var.app_security_group]
      assignPublicIp = "DISABLED"
    }
  })
}
