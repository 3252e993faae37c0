output "alarm_topic_arn" {
  description = "SNS topic of every alarm."
  value       = aws_sns_topic.alarms.arn
}

output "retrieval_metric" {
  description = "Namespace/name of the retrieval latency metric."
  value       = "${var.metric_namespace}/${aws_cloudwatch_log_metric_filter.retrieval_duration.metric_transformation[0].name}"
}
