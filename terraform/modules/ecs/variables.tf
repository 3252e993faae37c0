variable "name" {
  description = "Name prefix."
  type        = string
}

variable "region" {
  description = "AWS region (awslogs)."
  type        = string
}

variable "vpc_id" {
  description = "VPC of the target group."
  type        = string
}

variable "private_subnet_ids" {
  description = "Subnets of the tasks."
  type        = list(string)
}

variable "alb_subnet_ids" {
  description = "Subnets of the load balancer."
  type        = list(string)
}

variable "alb_internal" {
  description = "Internal load balancer."
  type        = bool
}

variable "alb_security_group" {
  description = "Load balancer security group."
  type        = string
}

variable "app_security_group" {
  description = "Tasks security group."
  type        = string
}

variable "certificate_arn" {
  description = "ACM certificate of the HTTPS listener."
  type        = string
}

variable "kms_key_arn" {
  description = "KMS key for logs and secrets."
  type        = string
}

variable "log_retention_days" {
  description = "CloudWatch Logs retention."
  type        = number
}

variable "image" {
  description = "Service image."
  type        = string
}

variable "api_key_hashes" {
  description = "COGNIS_API_KEY_HASHES."
  type        = string
  sensitive   = true
}

variable "api_desired_count" {
  description = "API tasks."
  type        = number
}

variable "relay_desired_count" {
  description = "Relay tasks."
  type        = number
}

variable "worker_desired_count" {
  description = "Ingestion worker tasks."
  type        = number
}

variable "extra_environment" {
  description = "More COGNIS_* settings for every task."
  type        = map(string)
  default     = {}

  validation {
    condition     = alltrue([for k in keys(var.extra_environment) : startswith(k, "COGNIS_")])
    error_message = "Only COGNIS_* settings belong here."
  }
}

variable "database" {
  description = "Aurora connection: writer endpoint, reader endpoint (the API's searches, lists, history and exports), port, database and the RDS-managed master secret."
  type = object({
    host        = string
    reader_host = string
    port        = number
    name        = string
    secret_arn  = string
  })
}

variable "opensearch" {
  description = "OpenSearch domain, users and secrets."
  type = object({
    url               = string
    app_username      = string
    app_secret_arn    = string
    master_username   = string
    master_secret_arn = string
    app_index_pattern = string
    replicas          = number
  })
}

variable "embedding_http" {
  description = "External OpenAI-compatible embedding endpoint (API root, model, bearer key secret ARN); a null url runs the model service (embed-serve) as an ECS service of its own."
  type = object({
    url                = optional(string)
    model              = optional(string)
    api_key_secret_arn = optional(string)
  })
  default = {}
}

variable "embedder_desired_count" {
  description = "Tasks of the model service (embed-serve); each holds one copy of the model."
  type        = number
  default     = 1
}

variable "embedder_cpu" {
  description = "CPU units of a model service task (the model's forward passes run here)."
  type        = number
  default     = 2048
}

variable "embedder_memory" {
  description = "MiB of a model service task (all-mpnet-base-v2 and its int8 query copy: about 1.5 GiB)."
  type        = number
  default     = 4096
}
