#!/usr/bin/env bash
# compose.yaml's Postgres, on the first start of its volume, as the image's superuser (the
# role-admin step): the tables' owner `cognis` (CREATEDB, no CREATEROLE: issue 53) and its
# database, pgvector, the service's roles (scripts/service-roles.sql), and what only the
# superuser takes from PUBLIC in each database (scripts/database-hardening.sql). For a volume
# made before, run once:
#   docker compose exec postgres bash /docker-entrypoint-initdb.d/10-cognis-roles.sh
# (a volume made before 2026-12 has `cognis` as its superuser: see docs/deployment.md).
set -euo pipefail
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname postgres \
    -v owner=cognis -v owner_pw="$COGNIS_OWNER_DB_PASSWORD" -v db="$POSTGRES_DB" <<'SQL'
SELECT format('CREATE ROLE %I LOGIN', :'owner')
 WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = :'owner') \gexec
ALTER ROLE :"owner" WITH LOGIN CREATEDB PASSWORD :'owner_pw';
ALTER DATABASE :"db" OWNER TO :"owner";
SQL
for db in template1 "$POSTGRES_DB"; do
    psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$db" \
        -c 'CREATE EXTENSION IF NOT EXISTS vector'
done
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
    -v owner=cognis -v app=cognis_app -v app_pw="$COGNIS_APP_DB_PASSWORD" \
    -v worker=cognis_worker -v worker_pw="$COGNIS_WORKER_DB_PASSWORD" \
    -f /cognis/service-roles.sql
for db in template1 "$POSTGRES_DB"; do
    psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$db" -f /cognis/database-hardening.sql
done
