variable "name" {
  description = "Name prefix."
  type        = string
}

variable "account_id" {
  description = "AWS account id (OpenSearch metrics dimension ClientId)."
  type        = string
}

variable "kms_key_arn" {
  description = "KMS key of the SNS topic."
  type        = string
}

variable "api_log_group_name" {
  description = "Log group with the API's memory_retrieval lines."
  type        = string
}

variable "opensearch_domain_name" {
  description = "OpenSearch domain."
  type        = string
}

variable "alb_arn_suffix" {
  description = "Load balancer ARN suffix."
  type        = string
}

variable "target_group_arn_suffix" {
  description = "Target group ARN suffix."
  type        = string
}

variable "alarm_email" {
  description = "Subscriber address; empty for none."
  type        = string
  default     = ""
}

variable "metric_namespace" {
  description = "Namespace of the service's log-derived metrics."
  type        = string
  default     = "Cognis"
}

variable "retrieval_p95_threshold_ms" {
  description = "Retrieval p95 alarm threshold in milliseconds."
  type        = number
}

variable "opensearch_cpu_threshold" {
  description = "OpenSearch CPU alarm threshold in percent."
  type        = number
}
