-- Cognis Memory: roles for readers (installed by migration 0016_reader_roles).
--
-- cognis_analyst: read-only, bound to ONE tenant by the login role it connects as, through
-- analyst_tenants, which only the tables' owner writes. Its policies do not read
-- cognis.tenant_id, and a RESTRICTIVE policy binds it on top of the service's own policies, so
-- `SET cognis.tenant_id = ...` cannot move an analyst to another tenant.
-- cognis_auditor: read-only, every tenant's rows. Nobody is a member until a DBA grants it.
-- Both roles are cluster-wide and NOLOGIN: log in as a role that is a member of one of them.

DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'cognis_analyst') THEN
        CREATE ROLE cognis_analyst NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'cognis_auditor') THEN
        CREATE ROLE cognis_auditor NOLOGIN;
    END IF;
EXCEPTION WHEN duplicate_object THEN NULL;  -- created meanwhile by another database's migration
END $$;

CREATE TABLE IF NOT EXISTS analyst_tenants (
    role_name text PRIMARY KEY,
    tenant_id uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    created_at timestamptz NOT NULL DEFAULT now()
);
-- Not FORCE: the owner manages the bindings; a reader sees its own binding only.
ALTER TABLE analyst_tenants ENABLE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS analyst_tenants_own_binding ON analyst_tenants;
CREATE POLICY analyst_tenants_own_binding ON analyst_tenants FOR SELECT
    USING (role_name = current_user);

-- The tenant the connected analyst is bound to (NULL when none: it then sees nothing).
CREATE OR REPLACE FUNCTION cognis_analyst_tenant() RETURNS uuid
LANGUAGE sql STABLE PARALLEL SAFE
AS $$ SELECT tenant_id FROM analyst_tenants WHERE role_name = current_user $$;

DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['memories', 'messages', 'outbox', 'ingest_tasks',
                             'ingest_decisions', 'idempotency_keys', 'user_erasures'] LOOP
        EXECUTE format('DROP POLICY IF EXISTS %I ON %I', t || '_analyst_read', t);
        EXECUTE format('CREATE POLICY %I ON %I FOR SELECT TO cognis_analyst '
                       'USING (tenant_id = cognis_analyst_tenant())', t || '_analyst_read', t);
        EXECUTE format('DROP POLICY IF EXISTS %I ON %I', t || '_analyst_bound', t);
        EXECUTE format('CREATE POLICY %I ON %I AS RESTRICTIVE TO cognis_analyst '
                       'USING (tenant_id = cognis_analyst_tenant()) WITH CHECK (false)',
                       t || '_analyst_bound', t);
        EXECUTE format('DROP POLICY IF EXISTS %I ON %I', t || '_auditor_read', t);
        EXECUTE format('CREATE POLICY %I ON %I FOR SELECT TO cognis_auditor USING (true)',
                       t || '_auditor_read', t);
        EXECUTE format('GRANT SELECT ON %I TO cognis_analyst, cognis_auditor', t);
    END LOOP;
END $$;

GRANT USAGE ON SCHEMA public TO cognis_analyst, cognis_auditor;
GRANT SELECT ON categories TO cognis_analyst, cognis_auditor;
GRANT SELECT ON analyst_tenants TO cognis_analyst;
GRANT SELECT ON tenants, analyst_tenants TO cognis_auditor;

COMMENT ON TABLE analyst_tenants IS
    'Which tenant each analyst login role reads (cognis_analyst). Written by the owner only, a reader sees its own row.';
COMMENT ON COLUMN analyst_tenants.role_name IS 'A login role that is a member of cognis_analyst.';
COMMENT ON COLUMN analyst_tenants.tenant_id IS 'The one tenant whose rows that role reads (tenants.id).';
COMMENT ON COLUMN analyst_tenants.created_at IS 'When the binding was made.';
COMMENT ON FUNCTION cognis_analyst_tenant() IS
    'The tenant the connected analyst is bound to in analyst_tenants, NULL (no rows at all) when none.';
