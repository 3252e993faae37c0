variable "region" {
  description = "AWS region."
  type        = string
}

variable "environment" {
  description = "Environment name, used in resource names (e.g. prod, staging)."
  type        = string
  default     = "prod"
}

variable "tags" {
  description = "Extra tags for every resource."
  type        = map(string)
  default     = {}
}

# ---------------------------------------------------------------- network (existing VPC)

variable "vpc_id" {
  description = "Existing VPC."
  type        = string
}

variable "private_subnet_ids" {
  description = "Private subnets (with a route to NAT or VPC endpoints), in at least 3 AZs: Aurora, OpenSearch (first 3), Redis and the ECS tasks."
  type        = list(string)

  validation {
    condition     = length(var.private_subnet_ids) >= 3
    error_message = "Give at least 3 private subnets in 3 AZs (OpenSearch zone awareness uses 3)."
  }
}

variable "public_subnet_ids" {
  description = "Subnets for the load balancer (public for an internet-facing ALB, private when alb_internal = true)."
  type        = list(string)
}

variable "alb_internal" {
  description = "Make the load balancer internal (reachable only inside the VPC)."
  type        = bool
  default     = false
}

variable "alb_ingress_cidrs" {
  description = "IPv4 ranges allowed to reach the load balancer on 443. The only ingress open to addresses outside the VPC."
  type        = list(string)
  default     = ["0.0.0.0/0"]
}

variable "certificate_arn" {
  description = "ACM certificate for the HTTPS listener."
  type        = string
}

# ---------------------------------------------------------------- service

variable "image" {
  description = "Container image of the service (built from the repository's Dockerfile and pushed to ECR), e.g. 123456789012.dkr.ecr.eu-west-1.amazonaws.com/cognis-memory:0.1.0."
  type        = string
}

variable "api_key_hashes" {
  description = "Comma-separated SHA-256 hex digests of accepted API keys (COGNIS_API_KEY_HASHES). Stored in Secrets Manager."
  type        = string
  sensitive   = true

  validation {
    condition     = length(trimspace(var.api_key_hashes)) > 0
    error_message = "Configure at least one API key hash: without one the service accepts the development key."
  }
}

variable "api_desired_count" {
  description = "API tasks behind the load balancer."
  type        = number
  default     = 2
}

variable "relay_desired_count" {
  description = "Standalone outbox relays (they share work with FOR UPDATE SKIP LOCKED)."
  type        = number
  default     = 1
}

variable "worker_desired_count" {
  description = "Ingestion workers."
  type        = number
  default     = 1
}

variable "embedder_desired_count" {
  description = "Tasks of the model service (embed-serve), each one copy of the model; unused with embedding_http_url."
  type        = number
  default     = 1
}

variable "embedder_cpu" {
  description = "CPU units of a model service task."
  type        = number
  default     = 2048
}

variable "embedder_memory" {
  description = "MiB of a model service task."
  type        = number
  default     = 4096
}

variable "extra_environment" {
  description = "More COGNIS_* settings for every task (e.g. COGNIS_LLM_BASE_URL, COGNIS_LLM_MODEL)."
  type        = map(string)
  default     = {}
}

variable "embedding_http_url" {
  description = "API root of an external OpenAI-compatible embedding service (POST {url}/embeddings), e.g. an embedder running `python -m app embed-serve`. When set, every task embeds over HTTP (COGNIS_EMBEDDING_BACKEND=http) instead of loading the model; null keeps the model in each task."
  type        = string
  default     = null

  validation {
    condition     = var.embedding_http_url == null || can(regex("^https?://", var.embedding_http_url))
    error_message = "embedding_http_url must be an http:// or https:// URL."
  }
}

variable "embedding_http_model" {
  description = "Model name sent to the embedding service (COGNIS_EMBEDDING_HTTP_MODEL); null sends COGNIS_EMBEDDING_MODEL. It must be the model the stored vectors came from."
  type        = string
  default     = null
}

variable "embedding_http_api_key_secret_arn" {
  description = "ARN of an existing Secrets Manager secret whose value is the embedding service's bearer key (COGNIS_EMBEDDING_HTTP_API_KEY), encrypted with the stack's KMS key or aws/secretsmanager; null sends no key."
  type        = string
  default     = null

  validation {
    condition     = var.embedding_http_api_key_secret_arn == null || can(regex("^arn:aws[a-z-]*:secretsmanager:", var.embedding_http_api_key_secret_arn))
    error_message = "embedding_http_api_key_secret_arn must be a Secrets Manager secret ARN."
  }
}

variable "log_retention_days" {
  description = "CloudWatch Logs retention."
  type        = number
  default     = 365
}

# ---------------------------------------------------------------- stores

variable "aurora_engine_version" {
  description = "Aurora PostgreSQL 16 minor version (ships pgvector)."
  type        = string
  default     = "16.6"
}

variable "aurora_min_acu" {
  description = "Serverless v2 minimum capacity per instance."
  type        = number
  default     = 0.5
}

variable "aurora_max_acu" {
  description = "Serverless v2 maximum capacity per instance."
  type        = number
  default     = 16
}

variable "opensearch_engine_version" {
  description = "Amazon OpenSearch Service engine version (2.x)."
  type        = string
  default     = "OpenSearch_2.19"
}

variable "opensearch_instance_type" {
  description = "Data node type."
  type        = string
  default     = "r6g.large.search"
}

variable "redis_node_type" {
  description = "ElastiCache node type (query cache)."
  type        = string
  default     = "cache.t4g.medium"
}

# ---------------------------------------------------------------- alarms

variable "alarm_email" {
  description = "Address subscribed to the alarm topic (confirm the subscription mail). Empty: no subscription."
  type        = string
  default     = ""
}

variable "retrieval_p95_threshold_ms" {
  description = "Alarm when the p95 of memory_retrieval duration_ms exceeds this."
  type        = number
  default     = 500
}

variable "opensearch_cpu_threshold" {
  description = "Alarm when OpenSearch CPU utilisation exceeds this percentage."
  type        = number
  default     = 80
}
