variable "name" {
  description = "Domain name and name prefix (3-28 lower-case characters)."
  type        = string
}

variable "region" {
  description = "AWS region."
  type        = string
}

variable "account_id" {
  description = "AWS account id."
  type        = string
}

variable "partition" {
  description = "AWS partition."
  type        = string
}

variable "subnet_ids" {
  description = "Three private subnets in three AZs."
  type        = list(string)

  validation {
    condition     = length(var.subnet_ids) == 3
    error_message = "Zone awareness across 3 AZs needs exactly 3 subnets."
  }
}

variable "security_group_id" {
  description = "Security group of the domain."
  type        = string
}

variable "kms_key_arn" {
  description = "KMS key for encryption at rest, the secrets, the logs and the snapshot bucket."
  type        = string
}

variable "engine_version" {
  description = "OpenSearch_2.x."
  type        = string

  validation {
    condition     = startswith(var.engine_version, "OpenSearch_2.")
    error_message = "Cognis targets OpenSearch 2.x."
  }
}

variable "instance_type" {
  description = "Data node type."
  type        = string
}

variable "instance_count" {
  description = "Data nodes (a multiple of 3 for 3-AZ zone awareness)."
  type        = number
}

variable "volume_size_gb" {
  description = "gp3 volume per data node."
  type        = number
  default     = 100
}

variable "master_username" {
  description = "Fine-grained access master user."
  type        = string
  default     = "cognis_admin"
}

variable "app_username" {
  description = "Internal user of the service (created by the security bootstrap task)."
  type        = string
  default     = "cognis_app"
}

variable "log_retention_days" {
  description = "Retention of the domain's log groups."
  type        = number
}
