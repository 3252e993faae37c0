terraform {
  required_version = ">= 1.6"

  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = ">= 5.70, < 7.0"
    }
    random = {
      source  = "hashicorp/random"
      version = ">= 3.6, < 4.0"
    }
  }

  # Keep state remote and encrypted: it holds the generated OpenSearch and Redis passwords.
  # Configure with `terraform init -backend-config=...` (see README.md).
  backend "s3" {}
}

provider "aws" {
  region = var.region

  default_tags {
    tags = merge({ Project = "cognis-memory", Environment = var.environment }, var.tags)
  }
}
