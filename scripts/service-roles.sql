-- The service's database logins (idempotent; psql variables app, worker, app_pw, worker_pw).
-- Run as a superuser (or a CREATEROLE role) by scripts/services.sh and by compose's Postgres.
--   cognis_rw          DML on the service's tables (granted by migration 0007), under row-level
--                      security: a member sees the rows of the tenant its transaction sets, only;
--   cognis_background  also sees every tenant's rows while no tenant is set (claiming work);
--   :app               serves requests (COGNIS_DATABASE_URL), in cognis_rw;
--   :worker            runs the relay and ingestion workers (COGNIS_WORKER_DATABASE_URL).
-- Neither login owns a table: the migrating role (COGNIS_MIGRATION_DATABASE_URL) does.
SELECT format('CREATE ROLE %I NOLOGIN', r)
  FROM unnest(ARRAY['cognis_rw', 'cognis_background', :'app', :'worker']) AS r
 WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = r) \gexec
GRANT cognis_rw TO cognis_background;
ALTER ROLE :"app" WITH LOGIN PASSWORD :'app_pw';
ALTER ROLE :"worker" WITH LOGIN PASSWORD :'worker_pw';
GRANT cognis_rw TO :"app";
GRANT cognis_background TO :"worker";
-- Server-side bounds per login (docs/deployment.md, "Connections"): a runaway statement, or a
-- transaction a dead client left open, cannot hold its locks and its connection for ever. The
-- service never sets these itself, so the role's values hold on every connection it opens;
-- the migrating role sets its own per session (app/db/migration_safety.py).
ALTER ROLE :"app" SET statement_timeout = '5min';
ALTER ROLE :"app" SET idle_in_transaction_session_timeout = '10min';
ALTER ROLE :"worker" SET statement_timeout = '30min';
ALTER ROLE :"worker" SET idle_in_transaction_session_timeout = '10min';
-- The session settings the service also sends when it connects (app/db/engine.py): behind a
-- transaction-mode pooler (PgBouncer, scripts/pgbouncer.sh) they reach the server only this way.
ALTER ROLE :"app" SET plan_cache_mode = 'force_custom_plan';
ALTER ROLE :"app" SET jit = 'off';
ALTER ROLE :"worker" SET plan_cache_mode = 'force_custom_plan';
ALTER ROLE :"worker" SET jit = 'off';
