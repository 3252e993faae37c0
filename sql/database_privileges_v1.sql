-- Who may connect to this database and make temporary objects in it (installed by migration
-- 0023_path_proof; run again by `python -m app restore`, since a dump does not carry a
-- database's own privileges): PUBLIC neither, the service's roles (cognis_rw) both, each
-- analyst bound in analyst_tenants CONNECT; nobody but the owner creates in schema public.
-- Only the database's owner (or a superuser) may change this: a migrating role that is
-- neither is told what to run instead of failing the upgrade half way.
DO $$
DECLARE
    db text := current_database();
    bound record;
BEGIN
    IF NOT (pg_has_role(current_user, (SELECT datdba FROM pg_database WHERE datname = db), 'MEMBER')
            OR (SELECT rolsuper FROM pg_roles WHERE rolname = current_user)) THEN
        RAISE WARNING 'not the owner of database %: as its owner, run REVOKE CONNECT, TEMPORARY ON DATABASE % FROM PUBLIC; GRANT CONNECT, TEMPORARY ON DATABASE % TO cognis_rw; REVOKE CREATE ON SCHEMA public FROM PUBLIC; and GRANT CONNECT to each bound analyst (docs/deployment.md, Readers)', db, db, db;
        RETURN;
    END IF;
    EXECUTE format('REVOKE CONNECT, TEMPORARY ON DATABASE %I FROM PUBLIC', db);
    EXECUTE format('GRANT CONNECT, TEMPORARY ON DATABASE %I TO cognis_rw', db);
    FOR bound IN
        SELECT a.role_name FROM analyst_tenants a JOIN pg_roles r ON r.rolname = a.role_name
    LOOP
        EXECUTE format('GRANT CONNECT ON DATABASE %I TO %I', db, bound.role_name);
    END LOOP;
    REVOKE CREATE ON SCHEMA public FROM PUBLIC;
END $$;
