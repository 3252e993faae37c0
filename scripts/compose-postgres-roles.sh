#!/usr/bin/env bash
# compose.yaml's Postgres, on the first start of its volume: the service's logins
# (scripts/service-roles.sql), and what only the superuser takes from PUBLIC in each database
# (scripts/database-hardening.sql). For a volume made before, run once:
#   docker compose exec postgres bash /docker-entrypoint-initdb.d/10-cognis-roles.sh
set -euo pipefail
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
    -v owner="$POSTGRES_USER" -v app=cognis_app -v app_pw="$COGNIS_APP_DB_PASSWORD" \
    -v worker=cognis_worker -v worker_pw="$COGNIS_WORKER_DB_PASSWORD" \
    -f /cognis/service-roles.sql
for db in template1 "$POSTGRES_DB"; do
    psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$db" -f /cognis/database-hardening.sql
done
