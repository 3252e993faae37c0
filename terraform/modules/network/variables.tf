variable "name" {
  description = "Name prefix."
  type        = string
}

variable "vpc_id" {
  description = "Existing VPC."
  type        = string
}

variable "alb_ingress_cidrs" {
  description = "IPv4 ranges allowed to reach the load balancer on 443."
  type        = list(string)
}

variable "app_port" {
  description = "Port the API listens on in its task."
  type        = number
  default     = 8000
}

variable "aws_api_egress_cidr" {
  description = "Where the tasks may open HTTPS connections for AWS APIs (NAT: anywhere)."
  type        = string
  default     = "0.0.0.0/0"
}

variable "embedder_port" {
  description = "Port of the model service (embed-serve) the other tasks reach."
  type        = number
  default     = 8080
}
