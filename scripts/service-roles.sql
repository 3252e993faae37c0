-- The role-admin step (idempotent; psql variables owner, app, worker, app_pw, worker_pw): the
-- roles the service and its readers use, made once by a superuser (or a CREATEROLE role that
-- only DBAs use) so that neither the service nor the migrations need CREATEROLE. Run by
-- scripts/services.sh and by compose's Postgres; on a managed Postgres, by its admin user
-- (docs/operations.md, "Roles").
--   cognis_rw          DML on the service's tables (granted by migration 0007), under row-level
--                      security: a member sees the rows of the tenant its transaction sets, only;
--   cognis_background  also sees every tenant's rows while no tenant is set (claiming work);
--   cognis_analyst, cognis_auditor
--                      the readers' groups (migration 0016; docs/analysts.md);
--   :app               serves requests (COGNIS_DATABASE_URL), in cognis_rw;
--   :worker            runs the relay and ingestion workers (COGNIS_WORKER_DATABASE_URL).
-- Neither login owns a table: :owner, the migrating role (COGNIS_MIGRATION_DATABASE_URL), does.
-- It has no CREATEROLE: on PostgreSQL 15 a CREATEROLE role may grant itself
-- pg_execute_server_program (COPY ... FROM PROGRAM runs a shell as the server's OS user). It
-- administers the two service groups instead (migration 0007 grants cognis_rw to
-- cognis_background, and the owner counts every tenant's rows in cognis_background), and is
-- no member of the readers' groups, whose RESTRICTIVE policies would bind it too.
SELECT format('CREATE ROLE %I NOLOGIN', r)
  FROM unnest(ARRAY['cognis_rw', 'cognis_background', 'cognis_analyst', 'cognis_auditor',
                    :'app', :'worker']) AS r
 WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = r) \gexec
ALTER ROLE :"owner" NOCREATEROLE;
GRANT cognis_rw, cognis_background TO :"owner" WITH ADMIN OPTION;
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
