# Amazon OpenSearch Service 2.x: the BM25 index, rebuilt from Postgres at any time
# (`python -m app reindex --recreate`), so it holds nothing that is not also in Aurora.

resource "random_password" "master" {
  length           = 32
  special          = true
  override_special = "-_.~!"
  min_upper        = 1
  min_lower        = 1
  min_numeric      = 1
  min_special      = 1
}

resource "random_password" "app" {
  length           = 32
  special          = true
  override_special = "-_.~!"
  min_upper        = 1
  min_lower        = 1
  min_numeric      = 1
  min_special      = 1
}

resource "aws_secretsmanager_secret" "master" {
  #checkov:skip=CKV2_AWS_57:The fine-grained-access master password is changed through the domain's advanced security options (docs/deployment.md, rotating secrets), not by a rotation Lambda.
  name                    = "${var.name}/opensearch/master"
  description             = "OpenSearch fine-grained access master user (administration only)"
  kms_key_id              = var.kms_key_arn
  recovery_window_in_days = 7
}

resource "aws_secretsmanager_secret_version" "master" {
  secret_id     = aws_secretsmanager_secret.master.id
  secret_string = random_password.master.result
}

resource "aws_secretsmanager_secret" "app" {
  #checkov:skip=CKV2_AWS_57:Rotated by re-running the security bootstrap task with a new value (docs/deployment.md), not by a rotation Lambda.
  name                    = "${var.name}/opensearch/app"
  description             = "OpenSearch internal user of the Cognis API, relay and worker"
  kms_key_id              = var.kms_key_arn
  recovery_window_in_days = 7
}

resource "aws_secretsmanager_secret_version" "app" {
  secret_id     = aws_secretsmanager_secret.app.id
  secret_string = random_password.app.result
}

# ---------------------------------------------------------------- logs

resource "aws_cloudwatch_log_group" "this" {
  for_each = toset(["index-slow", "search-slow", "application", "audit"])

  name              = "/aws/opensearch/${var.name}/${each.key}"
  retention_in_days = var.log_retention_days
  kms_key_id        = var.kms_key_arn
}

data "aws_iam_policy_document" "logs" {
  statement {
    actions   = ["logs:PutLogEvents", "logs:CreateLogStream"]
    resources = [for group in aws_cloudwatch_log_group.this : "${group.arn}:*"]
    principals {
      type        = "Service"
      identifiers = ["es.amazonaws.com"]
    }
    condition {
      test     = "StringEquals"
      variable = "aws:SourceAccount"
      values   = [var.account_id]
    }
  }
}

resource "aws_cloudwatch_log_resource_policy" "this" {
  policy_name     = "${var.name}-opensearch-logs"
  policy_document = data.aws_iam_policy_document.logs.json
}

# ---------------------------------------------------------------- domain

data "aws_iam_policy_document" "access" {
  #checkov:skip=CKV_AWS_283:Fine-grained access control authenticates every request (basic auth of internal users, which IAM principals in a resource policy would reject); the domain is reachable only inside the VPC from the tasks' security group.
  # Fine-grained access control authenticates every request (internal users); the network path
  # is the VPC security group. AWS's recommended resource policy for FGAC domains is open.
  statement {
    actions   = ["es:ESHttp*"]
    resources = ["arn:${var.partition}:es:${var.region}:${var.account_id}:domain/${var.name}/*"]
    principals {
      type        = "AWS"
      identifiers = ["*"]
    }
  }
}

resource "aws_opensearch_domain" "this" {
  #checkov:skip=CKV2_AWS_59:Three data nodes across three AZs elect a master among themselves; dedicated masters (3 more instances) are the first upgrade past this size (terraform/README.md).
  #checkov:skip=CKV_AWS_318:Same: no dedicated master nodes at this size.
  domain_name    = var.name
  engine_version = var.engine_version

  cluster_config {
    instance_type          = var.instance_type
    instance_count         = var.instance_count
    zone_awareness_enabled = true

    zone_awareness_config {
      availability_zone_count = 3
    }
  }

  ebs_options {
    ebs_enabled = true
    volume_type = "gp3"
    volume_size = var.volume_size_gb
    throughput  = 250
    iops        = 3000
  }

  encrypt_at_rest {
    enabled    = true
    kms_key_id = var.kms_key_arn
  }

  node_to_node_encryption {
    enabled = true
  }

  domain_endpoint_options {
    enforce_https       = true
    tls_security_policy = "Policy-Min-TLS-1-2-2019-07"
  }

  advanced_security_options {
    enabled                        = true
    anonymous_auth_enabled         = false
    internal_user_database_enabled = true

    master_user_options {
      master_user_name     = var.master_username
      master_user_password = random_password.master.result
    }
  }

  auto_tune_options {
    desired_state       = "ENABLED"
    rollback_on_disable = "NO_ROLLBACK"
  }

  vpc_options {
    subnet_ids         = var.subnet_ids
    security_group_ids = [var.security_group_id]
  }

  access_policies = data.aws_iam_policy_document.access.json

  log_publishing_options {
    log_type                 = "INDEX_SLOW_LOGS"
    enabled                  = true
    cloudwatch_log_group_arn = aws_cloudwatch_log_group.this["index-slow"].arn
  }

  log_publishing_options {
    log_type                 = "SEARCH_SLOW_LOGS"
    enabled                  = true
    cloudwatch_log_group_arn = aws_cloudwatch_log_group.this["search-slow"].arn
  }

  log_publishing_options {
    log_type                 = "ES_APPLICATION_LOGS"
    enabled                  = true
    cloudwatch_log_group_arn = aws_cloudwatch_log_group.this["application"].arn
  }

  log_publishing_options {
    log_type                 = "AUDIT_LOGS"
    enabled                  = true
    cloudwatch_log_group_arn = aws_cloudwatch_log_group.this["audit"].arn
  }

  depends_on = [aws_cloudwatch_log_resource_policy.this]
}

# ---------------------------------------------------------------- manual snapshots to S3

resource "aws_s3_bucket" "snapshots" {
  #checkov:skip=CKV_AWS_144:Snapshots are a convenience copy: the index is rebuilt from Aurora (reindex --recreate), which has its own backups.
  #checkov:skip=CKV_AWS_18:Server access logging needs a separate log bucket; object access is already in CloudTrail data events where enabled.
  #checkov:skip=CKV2_AWS_62:No consumer for object events.
  bucket_prefix = "${var.name}-os-snapshots-"
}

resource "aws_s3_bucket_versioning" "snapshots" {
  bucket = aws_s3_bucket.snapshots.id

  versioning_configuration {
    status = "Enabled"
  }
}

resource "aws_s3_bucket_server_side_encryption_configuration" "snapshots" {
  bucket = aws_s3_bucket.snapshots.id

  rule {
    apply_server_side_encryption_by_default {
      sse_algorithm     = "aws:kms"
      kms_master_key_id = var.kms_key_arn
    }
    bucket_key_enabled = true
  }
}

resource "aws_s3_bucket_public_access_block" "snapshots" {
  bucket                  = aws_s3_bucket.snapshots.id
  block_public_acls       = true
  block_public_policy     = true
  ignore_public_acls      = true
  restrict_public_buckets = true
}

resource "aws_s3_bucket_lifecycle_configuration" "snapshots" {
  bucket = aws_s3_bucket.snapshots.id

  rule {
    id     = "expire-old-versions"
    status = "Enabled"

    filter {}

    noncurrent_version_expiration {
      noncurrent_days = 30
    }

    abort_incomplete_multipart_upload {
      days_after_initiation = 7
    }
  }
}

data "aws_iam_policy_document" "snapshot_assume" {
  statement {
    actions = ["sts:AssumeRole"]
    principals {
      type        = "Service"
      identifiers = ["es.amazonaws.com"]
    }
    condition {
      test     = "StringEquals"
      variable = "aws:SourceAccount"
      values   = [var.account_id]
    }
  }
}

resource "aws_iam_role" "snapshot" {
  name               = "${var.name}-opensearch-snapshots"
  assume_role_policy = data.aws_iam_policy_document.snapshot_assume.json
}

data "aws_iam_policy_document" "snapshot" {
  statement {
    actions   = ["s3:ListBucket"]
    resources = [aws_s3_bucket.snapshots.arn]
  }

  statement {
    actions   = ["s3:GetObject", "s3:PutObject", "s3:DeleteObject"]
    resources = ["${aws_s3_bucket.snapshots.arn}/*"]
  }

  statement {
    actions   = ["kms:Decrypt", "kms:GenerateDataKey"]
    resources = [var.kms_key_arn]
  }
}

resource "aws_iam_role_policy" "snapshot" {
  name   = "snapshots"
  role   = aws_iam_role.snapshot.id
  policy = data.aws_iam_policy_document.snapshot.json
}
