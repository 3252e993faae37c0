-- Cognis Memory: functions and policies that no search_path can redirect (installed by
-- migration 0023_path_proof).
--
-- Until this file, cognis_analyst_tenant() read `analyst_tenants` unqualified from a string
-- body, parsed at each call with the caller's search_path, in which the session's temporary
-- schema comes first: an analyst who created a TEMP table of that name chose its own tenant.
-- Now:
--   * the two functions the row-level security policies call have SQL-standard bodies
--     (RETURN ...): parsed once, here, with every name bound to its object as a view's are,
--     so no search_path, temporary object or look-alike in another schema changes what they
--     read; they stay inlinable into the queries that use them;
--   * every other function of the schema runs with a fixed search_path, pg_temp explicitly
--     last (temporary objects are then never found before the real ones);
--   * the analysts' policies call their function once per query, as an InitPlan
--     ((SELECT ...)), not once per row;
--   * the auditor reads every analyst binding.
-- The database-level privileges (CONNECT and TEMPORARY taken from PUBLIC, CONNECT granted per
-- login) are the migration's, since they name the database.

CREATE OR REPLACE FUNCTION public.cognis_tenant() RETURNS uuid
LANGUAGE sql STABLE PARALLEL SAFE
RETURN NULLIF(pg_catalog.current_setting('cognis.tenant_id', true), '')::pg_catalog.uuid;

CREATE OR REPLACE FUNCTION public.cognis_analyst_tenant() RETURNS uuid
LANGUAGE sql STABLE PARALLEL SAFE
RETURN (SELECT a.tenant_id FROM public.analyst_tenants a WHERE a.role_name = CURRENT_USER);

ALTER FUNCTION public.outbox_notify() SET search_path = pg_catalog, public, pg_temp;
ALTER FUNCTION public.memory_chain(uuid) SET search_path = pg_catalog, public, pg_temp;
ALTER FUNCTION public.memories_as_of(text, timestamptz) SET search_path = pg_catalog, public, pg_temp;
ALTER FUNCTION public.memories_known_at(text, timestamptz) SET search_path = pg_catalog, public, pg_temp;
ALTER FUNCTION public.memories_true_at(text, timestamptz) SET search_path = pg_catalog, public, pg_temp;

-- Binding a login role to a tenant lets it connect to this database, and unbinding it takes
-- that away: an analyst of one database cannot log into another (CONNECT is no longer PUBLIC's).
-- Runs as whoever writes the bindings (the owner, who owns the database too).
CREATE OR REPLACE FUNCTION public.analyst_tenants_connect() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, public, pg_temp
AS $$
BEGIN
    IF TG_OP IN ('DELETE', 'UPDATE') THEN
        BEGIN
            EXECUTE format('REVOKE CONNECT ON DATABASE %I FROM %I', current_database(), OLD.role_name);
        EXCEPTION WHEN undefined_object OR insufficient_privilege THEN
            RAISE WARNING 'analyst binding of % removed; its CONNECT on % could not be revoked: %',
                OLD.role_name, current_database(), SQLERRM;
        END;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        -- No exception handler: a binding for a role that does not exist, or one its writer
        -- cannot let connect, is refused rather than kept half done.
        EXECUTE format('GRANT CONNECT ON DATABASE %I TO %I', current_database(), NEW.role_name);
        RETURN NEW;
    END IF;
    RETURN OLD;
END;
$$;

DROP TRIGGER IF EXISTS analyst_tenants_connect ON public.analyst_tenants;
CREATE TRIGGER analyst_tenants_connect
    AFTER INSERT OR DELETE OR UPDATE OF role_name ON public.analyst_tenants
    FOR EACH ROW EXECUTE FUNCTION public.analyst_tenants_connect();

DO $$
DECLARE
    p record;
BEGIN
    FOR p IN
        SELECT policyname, tablename, permissive FROM pg_catalog.pg_policies
        WHERE schemaname = 'public' AND policyname IN (tablename || '_analyst_read',
                                                       tablename || '_analyst_bound')
    LOOP
        EXECUTE format('ALTER POLICY %I ON public.%I USING (tenant_id = (SELECT public.cognis_analyst_tenant()))',
                       p.policyname, p.tablename);
    END LOOP;
END $$;

DROP POLICY IF EXISTS analyst_tenants_auditor_read ON public.analyst_tenants;
CREATE POLICY analyst_tenants_auditor_read ON public.analyst_tenants FOR SELECT TO cognis_auditor
    USING (true);

COMMENT ON FUNCTION public.cognis_tenant() IS
    'The tenant the connected service role set for its transaction (cognis.tenant_id), NULL when none. A SQL-standard body: no search_path changes what it reads.';
COMMENT ON FUNCTION public.cognis_analyst_tenant() IS
    'The tenant the connected analyst is bound to in public.analyst_tenants, NULL (no rows at all) when none. A SQL-standard body: no search_path, temporary table or look-alike changes what it reads.';
COMMENT ON FUNCTION public.analyst_tenants_connect() IS
    'Trigger of analyst_tenants: a bound login role may connect to this database, an unbound one may not.';
