variable "name" {
  description = "Replication group id and name prefix."
  type        = string
}

variable "subnet_ids" {
  description = "Private subnets."
  type        = list(string)
}

variable "security_group_id" {
  description = "Security group of the cache."
  type        = string
}

variable "kms_key_arn" {
  description = "KMS key for encryption at rest and the AUTH secret."
  type        = string
}

variable "node_type" {
  description = "Cache node type."
  type        = string
}

variable "engine_version" {
  description = "Redis engine version."
  type        = string
  default     = "7.1"
}
