-- Undo sql/path_proof_v1.sql (downgrade of 0023_path_proof): the definitions as released
-- before it (0007's cognis_tenant, 0016's cognis_analyst_tenant), functions on the caller's
-- search_path again, the analysts' policies calling their function per row.

CREATE OR REPLACE FUNCTION public.cognis_tenant() RETURNS uuid LANGUAGE sql STABLE PARALLEL SAFE
AS $$ SELECT NULLIF(current_setting('cognis.tenant_id', true), '')::uuid $$;

DO $$
DECLARE
    p record;
BEGIN
    FOR p IN
        SELECT policyname, tablename FROM pg_catalog.pg_policies
        WHERE schemaname = 'public' AND policyname IN (tablename || '_analyst_read',
                                                       tablename || '_analyst_bound')
    LOOP
        EXECUTE format('ALTER POLICY %I ON public.%I USING (tenant_id = cognis_analyst_tenant())',
                       p.policyname, p.tablename);
    END LOOP;
END $$;

CREATE OR REPLACE FUNCTION public.cognis_analyst_tenant() RETURNS uuid
LANGUAGE sql STABLE PARALLEL SAFE
AS $$ SELECT tenant_id FROM analyst_tenants WHERE role_name = current_user $$;

ALTER FUNCTION public.outbox_notify() RESET search_path;
ALTER FUNCTION public.memory_chain(uuid) RESET search_path;
ALTER FUNCTION public.memories_as_of(text, timestamptz) RESET search_path;
ALTER FUNCTION public.memories_known_at(text, timestamptz) RESET search_path;
ALTER FUNCTION public.memories_true_at(text, timestamptz) RESET search_path;

DROP POLICY IF EXISTS analyst_tenants_auditor_read ON public.analyst_tenants;
DROP TRIGGER IF EXISTS analyst_tenants_connect ON public.analyst_tenants;
DROP FUNCTION IF EXISTS public.analyst_tenants_connect();
