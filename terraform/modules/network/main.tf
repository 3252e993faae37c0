# Security groups: each hop allows only the next one.
#   internet --443--> ALB --8000--> app tasks --5432--> Aurora
#                                             --443---> OpenSearch
#                                             --6379--> Redis
#                                             --443---> AWS APIs (ECR, Secrets Manager, Logs)

resource "aws_security_group" "alb" {
  #checkov:skip=CKV2_AWS_5:Attached in another module (load balancer, ECS services, Aurora, OpenSearch, Redis), which checkov does not follow.
  name        = "${var.name}-alb"
  description = "Cognis load balancer: HTTPS in, the API tasks out"
  vpc_id      = var.vpc_id
}

resource "aws_security_group" "app" {
  #checkov:skip=CKV2_AWS_5:Attached in another module (load balancer, ECS services, Aurora, OpenSearch, Redis), which checkov does not follow.
  name        = "${var.name}-app"
  description = "Cognis ECS tasks (API, relay, worker, model service, migrations)"
  vpc_id      = var.vpc_id
}

resource "aws_security_group" "aurora" {
  #checkov:skip=CKV2_AWS_5:Attached in another module (load balancer, ECS services, Aurora, OpenSearch, Redis), which checkov does not follow.
  name        = "${var.name}-aurora"
  description = "Cognis Aurora PostgreSQL: from the ECS tasks only"
  vpc_id      = var.vpc_id
}

resource "aws_security_group" "opensearch" {
  #checkov:skip=CKV2_AWS_5:Attached in another module (load balancer, ECS services, Aurora, OpenSearch, Redis), which checkov does not follow.
  name        = "${var.name}-opensearch"
  description = "Cognis OpenSearch domain: HTTPS from the ECS tasks only"
  vpc_id      = var.vpc_id
}

resource "aws_security_group" "redis" {
  #checkov:skip=CKV2_AWS_5:Attached in another module (load balancer, ECS services, Aurora, OpenSearch, Redis), which checkov does not follow.
  name        = "${var.name}-redis"
  description = "Cognis ElastiCache Redis: from the ECS tasks only"
  vpc_id      = var.vpc_id
}

# ---------------------------------------------------------------- ALB

resource "aws_vpc_security_group_ingress_rule" "alb_https" {
  for_each = toset(var.alb_ingress_cidrs)

  security_group_id = aws_security_group.alb.id
  description       = "HTTPS from clients"
  ip_protocol       = "tcp"
  from_port         = 443
  to_port           = 443
  cidr_ipv4         = each.value
}

resource "aws_vpc_security_group_egress_rule" "alb_to_app" {
  security_group_id            = aws_security_group.alb.id
  description                  = "To the API tasks"
  ip_protocol                  = "tcp"
  from_port                    = var.app_port
  to_port                      = var.app_port
  referenced_security_group_id = aws_security_group.app.id
}

# ---------------------------------------------------------------- app tasks

resource "aws_vpc_security_group_ingress_rule" "app_from_alb" {
  security_group_id            = aws_security_group.app.id
  description                  = "API port from the load balancer"
  ip_protocol                  = "tcp"
  from_port                    = var.app_port
  to_port                      = var.app_port
  referenced_security_group_id = aws_security_group.alb.id
}

# The model service (python -m app embed-serve) is an ECS service of its own: the API, relay and
# worker tasks reach it on its port, within the tasks' security group.
resource "aws_vpc_security_group_ingress_rule" "app_from_app_embedder" {
  security_group_id            = aws_security_group.app.id
  description                  = "Model service port from the other tasks"
  ip_protocol                  = "tcp"
  from_port                    = var.embedder_port
  to_port                      = var.embedder_port
  referenced_security_group_id = aws_security_group.app.id
}

resource "aws_vpc_security_group_egress_rule" "app_to_app_embedder" {
  security_group_id            = aws_security_group.app.id
  description                  = "To the model service"
  ip_protocol                  = "tcp"
  from_port                    = var.embedder_port
  to_port                      = var.embedder_port
  referenced_security_group_id = aws_security_group.app.id
}

resource "aws_vpc_security_group_egress_rule" "app_to_aurora" {
  security_group_id            = aws_security_group.app.id
  description                  = "PostgreSQL"
  ip_protocol                  = "tcp"
  from_port                    = 5432
  to_port                      = 5432
  referenced_security_group_id = aws_security_group.aurora.id
}

resource "aws_vpc_security_group_egress_rule" "app_to_opensearch" {
  security_group_id            = aws_security_group.app.id
  description                  = "OpenSearch HTTPS"
  ip_protocol                  = "tcp"
  from_port                    = 443
  to_port                      = 443
  referenced_security_group_id = aws_security_group.opensearch.id
}

resource "aws_vpc_security_group_egress_rule" "app_to_redis" {
  security_group_id            = aws_security_group.app.id
  description                  = "Redis"
  ip_protocol                  = "tcp"
  from_port                    = 6379
  to_port                      = 6379
  referenced_security_group_id = aws_security_group.redis.id
}

resource "aws_vpc_security_group_egress_rule" "app_to_aws_apis" {
  #checkov:skip=CKV_AWS_382:Tasks pull the image from ECR and read Secrets Manager / write CloudWatch Logs over HTTPS through NAT; restrict to VPC endpoint prefix lists where the VPC has them.
  security_group_id = aws_security_group.app.id
  description       = "AWS APIs over HTTPS (ECR, Secrets Manager, CloudWatch Logs)"
  ip_protocol       = "tcp"
  from_port         = 443
  to_port           = 443
  cidr_ipv4         = var.aws_api_egress_cidr
}

# ---------------------------------------------------------------- stores: ingress from the tasks

resource "aws_vpc_security_group_ingress_rule" "aurora_from_app" {
  security_group_id            = aws_security_group.aurora.id
  description                  = "PostgreSQL from the ECS tasks"
  ip_protocol                  = "tcp"
  from_port                    = 5432
  to_port                      = 5432
  referenced_security_group_id = aws_security_group.app.id
}

resource "aws_vpc_security_group_ingress_rule" "opensearch_from_app" {
  security_group_id            = aws_security_group.opensearch.id
  description                  = "OpenSearch HTTPS from the ECS tasks"
  ip_protocol                  = "tcp"
  from_port                    = 443
  to_port                      = 443
  referenced_security_group_id = aws_security_group.app.id
}

resource "aws_vpc_security_group_ingress_rule" "redis_from_app" {
  security_group_id            = aws_security_group.redis.id
  description                  = "Redis from the ECS tasks"
  ip_protocol                  = "tcp"
  from_port                    = 6379
  to_port                      = 6379
  referenced_security_group_id = aws_security_group.app.id
}
