# Alarms to one SNS topic: retrieval p95 from the service's own structured log line, OpenSearch
# CPU, and the load balancer's view of the API.

resource "aws_sns_topic" "alarms" {
  name              = "${var.name}-alarms"
  kms_master_key_id = var.kms_key_arn
}

resource "aws_sns_topic_subscription" "email" {
  count = var.alarm_email == "" ? 0 : 1

  topic_arn = aws_sns_topic.alarms.arn
  protocol  = "email"
  endpoint  = var.alarm_email
}

# Each search logs one JSON line: {"event": "memory_retrieval", "duration_ms": 41.7, ...}.
# The filter turns duration_ms into a metric whose p95 the alarm watches.
resource "aws_cloudwatch_log_metric_filter" "retrieval_duration" {
  name           = "${var.name}-retrieval-duration"
  log_group_name = var.api_log_group_name
  pattern        = "{ $.event = \"memory_retrieval\" && $.duration_ms = * }"

  metric_transformation {
    name      = "RetrievalDuration"
    namespace = var.metric_namespace
    value     = "$.duration_ms"
    unit      = "Milliseconds"
  }
}

resource "aws_cloudwatch_metric_alarm" "retrieval_p95" {
  alarm_name          = "${var.name}-retrieval-p95"
  alarm_description   = "Retrieval p95 latency above ${var.retrieval_p95_threshold_ms} ms (memory_retrieval duration_ms)"
  namespace           = var.metric_namespace
  metric_name         = aws_cloudwatch_log_metric_filter.retrieval_duration.metric_transformation[0].name
  extended_statistic  = "p95"
  period              = 60
  evaluation_periods  = 5
  datapoints_to_alarm = 3
  threshold           = var.retrieval_p95_threshold_ms
  comparison_operator = "GreaterThanThreshold"
  treat_missing_data  = "notBreaching"
  alarm_actions       = [aws_sns_topic.alarms.arn]
  ok_actions          = [aws_sns_topic.alarms.arn]
}

resource "aws_cloudwatch_metric_alarm" "opensearch_cpu" {
  alarm_name          = "${var.name}-opensearch-cpu"
  alarm_description   = "OpenSearch data node CPU above ${var.opensearch_cpu_threshold} %"
  namespace           = "AWS/ES"
  metric_name         = "CPUUtilization"
  statistic           = "Maximum"
  period              = 300
  evaluation_periods  = 3
  datapoints_to_alarm = 3
  threshold           = var.opensearch_cpu_threshold
  comparison_operator = "GreaterThanThreshold"
  treat_missing_data  = "missing"
  alarm_actions       = [aws_sns_topic.alarms.arn]
  ok_actions          = [aws_sns_topic.alarms.arn]

  dimensions = {
    DomainName = var.opensearch_domain_name
    ClientId   = var.account_id
  }
}

resource "aws_cloudwatch_metric_alarm" "api_unhealthy" {
  alarm_name          = "${var.name}-api-unhealthy-targets"
  alarm_description   = "API tasks failing the /ready health check"
  namespace           = "AWS/ApplicationELB"
  metric_name         = "UnHealthyHostCount"
  statistic           = "Maximum"
  period              = 60
  evaluation_periods  = 3
  threshold           = 0
  comparison_operator = "GreaterThanThreshold"
  treat_missing_data  = "notBreaching"
  alarm_actions       = [aws_sns_topic.alarms.arn]
  ok_actions          = [aws_sns_topic.alarms.arn]

  dimensions = {
    LoadBalancer = var.alb_arn_suffix
    TargetGroup  = var.target_group_arn_suffix
  }
}

resource "aws_cloudwatch_metric_alarm" "api_5xx" {
  alarm_name          = "${var.name}-api-5xx"
  alarm_description   = "API answering 5xx"
  namespace           = "AWS/ApplicationELB"
  metric_name         = "HTTPCode_Target_5XX_Count"
  statistic           = "Sum"
  period              = 60
  evaluation_periods  = 5
  datapoints_to_alarm = 3
  threshold           = 10
  comparison_operator = "GreaterThanThreshold"
  treat_missing_data  = "notBreaching"
  alarm_actions       = [aws_sns_topic.alarms.arn]

  dimensions = {
    LoadBalancer = var.alb_arn_suffix
    TargetGroup  = var.target_group_arn_suffix
  }
}
