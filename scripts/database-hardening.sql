-- What only a superuser can take from PUBLIC in a database (idempotent): the built-in functions
-- and views belong to the bootstrap superuser, so the tables' owner cannot revoke them (its
-- REVOKE is a no-op warning). Run by scripts/services.sh in every database that accepts
-- connections, template1 included (a new database inherits it), on every start; on another
-- Postgres, by its superuser or admin user in the service's database (docs/operations.md,
-- Roles). Issue 54:
--   * large objects: any role that can connect could create them (`lo_from_bytea`), outside
--     every table, row-level security and quota: an unbounded disk fill by a read-only
--     analyst. The service uses none. Reading and writing one takes its owner's grants, so
--     with no way to create one, an analyst has none to write.
--   * statistics views: `pg_stat_user_tables` and its kin count every tenant's rows, inserts
--     and deletes per table. The service's roles (cognis_rw, hence the owner too) and
--     pg_read_all_stats (monitoring) keep them.
REVOKE EXECUTE ON FUNCTION
    pg_catalog.lo_from_bytea(oid, bytea),
    pg_catalog.lo_create(oid),
    pg_catalog.lo_creat(integer),
    pg_catalog.lo_import(text),
    pg_catalog.lo_import(text, oid)
  FROM PUBLIC;
SELECT format('REVOKE SELECT ON pg_catalog.%I FROM PUBLIC', viewname)
  FROM pg_views
 WHERE schemaname = 'pg_catalog'
   AND (viewname LIKE 'pg\_stat\_%\_tables' OR viewname LIKE 'pg\_stat\_%\_indexes'
        OR viewname LIKE 'pg\_statio\_%' OR viewname LIKE 'pg\_stat\_xact\_%') \gexec
SELECT format('GRANT SELECT ON pg_catalog.%I TO %s', viewname, grantees)
  FROM pg_views,
       LATERAL (SELECT string_agg(quote_ident(rolname), ', ') AS grantees FROM pg_roles
                 WHERE rolname IN ('cognis_rw', 'pg_read_all_stats')) AS r
 WHERE schemaname = 'pg_catalog'
   AND (viewname LIKE 'pg\_stat\_%\_tables' OR viewname LIKE 'pg\_stat\_%\_indexes'
        OR viewname LIKE 'pg\_statio\_%' OR viewname LIKE 'pg\_stat\_xact\_%') \gexec
