# Aurora PostgreSQL 16 Serverless v2: the system of record. pgvector ships with the engine; the
# project's first migration runs CREATE EXTENSION IF NOT EXISTS vector.

resource "aws_db_subnet_group" "this" {
  name       = var.name
  subnet_ids = var.subnet_ids
}

resource "aws_rds_cluster_parameter_group" "this" {
  name        = "${var.name}-aurora-pg16"
  family      = "aurora-postgresql16"
  description = "Cognis: TLS only, slow statements logged, HNSW builds and supersede churn"

  parameter {
    name  = "rds.force_ssl"
    value = "1"
  }

  parameter {
    name  = "log_min_duration_statement"
    value = "500"
  }

  parameter {
    name  = "log_statement"
    value = "ddl"
  }

  # HNSW builds (a migration's CREATE INDEX CONCURRENTLY, a REINDEX) are minutes instead of
  # hours when the graph fits in maintenance_work_mem (kB): see docs/deployment.md.
  parameter {
    name  = "maintenance_work_mem"
    value = "2097152"
  }

  # Every update or delete of a memory supersedes a row (is_current, superseded_at), and the
  # relay marks outbox rows processed: dead tuples pile up faster than the 20% default waits.
  parameter {
    name  = "autovacuum_vacuum_scale_factor"
    value = "0.05"
  }

  parameter {
    name  = "autovacuum_analyze_scale_factor"
    value = "0.02"
  }
}

resource "aws_rds_cluster" "this" {
  #checkov:skip=CKV2_AWS_8:Aurora's continuous automated backups (14 days, point-in-time restore) and the final snapshot cover recovery; add an AWS Backup plan for cross-account or longer retention.
  cluster_identifier = var.name
  engine             = "aurora-postgresql"
  engine_mode        = "provisioned"
  engine_version     = var.engine_version
  database_name      = var.database_name
  master_username    = var.master_username

  # The master password is generated and rotated by RDS in Secrets Manager; Terraform never sees it.
  manage_master_user_password   = true
  master_user_secret_kms_key_id = var.kms_key_arn

  storage_encrypted   = true
  kms_key_id          = var.kms_key_arn
  deletion_protection = true

  db_subnet_group_name            = aws_db_subnet_group.this.name
  vpc_security_group_ids          = [var.security_group_id]
  db_cluster_parameter_group_name = aws_rds_cluster_parameter_group.this.name

  iam_database_authentication_enabled = true
  enabled_cloudwatch_logs_exports     = ["postgresql"]
  backup_retention_period             = var.backup_retention_days
  preferred_backup_window             = "03:00-04:00"
  preferred_maintenance_window        = "sun:04:30-sun:05:30"
  copy_tags_to_snapshot               = true
  skip_final_snapshot                 = false
  final_snapshot_identifier           = "${var.name}-final"

  serverlessv2_scaling_configuration {
    min_capacity = var.min_acu
    max_capacity = var.max_acu
  }
}

resource "aws_rds_cluster_instance" "this" {
  count = var.instance_count

  identifier         = "${var.name}-${count.index + 1}"
  cluster_identifier = aws_rds_cluster.this.id
  instance_class     = "db.serverless"
  engine             = aws_rds_cluster.this.engine
  engine_version     = aws_rds_cluster.this.engine_version

  auto_minor_version_upgrade            = true
  performance_insights_enabled          = true
  performance_insights_kms_key_id       = var.kms_key_arn
  performance_insights_retention_period = 7
  monitoring_interval                   = 60
  monitoring_role_arn                   = aws_iam_role.monitoring.arn
  copy_tags_to_snapshot                 = true
}

data "aws_iam_policy_document" "monitoring_assume" {
  statement {
    actions = ["sts:AssumeRole"]
    principals {
      type        = "Service"
      identifiers = ["monitoring.rds.amazonaws.com"]
    }
  }
}

resource "aws_iam_role" "monitoring" {
  name               = "${var.name}-rds-monitoring"
  assume_role_policy = data.aws_iam_policy_document.monitoring_assume.json
}

resource "aws_iam_role_policy_attachment" "monitoring" {
  role       = aws_iam_role.monitoring.name
  policy_arn = "arn:aws:iam::aws:policy/service-role/AmazonRDSEnhancedMonitoringRole"
}
