variable "name" {
  description = "Cluster identifier and name prefix."
  type        = string
}

variable "subnet_ids" {
  description = "Private subnets for the DB subnet group."
  type        = list(string)
}

variable "security_group_id" {
  description = "Security group of the cluster."
  type        = string
}

variable "kms_key_arn" {
  description = "KMS key for storage, the master secret and Performance Insights."
  type        = string
}

variable "engine_version" {
  description = "Aurora PostgreSQL version (16.x)."
  type        = string

  validation {
    condition     = startswith(var.engine_version, "16.")
    error_message = "Cognis targets Aurora PostgreSQL 16."
  }
}

variable "database_name" {
  description = "Initial database."
  type        = string
  default     = "cognis"
}

variable "master_username" {
  description = "Master user (its password lives in Secrets Manager)."
  type        = string
  default     = "cognis"
}

variable "min_acu" {
  description = "Serverless v2 minimum ACU."
  type        = number
}

variable "max_acu" {
  description = "Serverless v2 maximum ACU."
  type        = number
}

variable "instance_count" {
  description = "Writer + readers (db.serverless)."
  type        = number
}

variable "backup_retention_days" {
  description = "Automated backup retention."
  type        = number
  default     = 14
}
