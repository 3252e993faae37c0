-- Reverses reader_roles_v1.sql, except the cluster-wide roles (other databases may use them).
DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['memories', 'messages', 'outbox', 'ingest_tasks',
                             'ingest_decisions', 'idempotency_keys', 'user_erasures'] LOOP
        EXECUTE format('DROP POLICY IF EXISTS %I ON %I', t || '_analyst_read', t);
        EXECUTE format('DROP POLICY IF EXISTS %I ON %I', t || '_analyst_bound', t);
        EXECUTE format('DROP POLICY IF EXISTS %I ON %I', t || '_auditor_read', t);
        EXECUTE format('REVOKE ALL ON %I FROM cognis_analyst, cognis_auditor', t);
    END LOOP;
END $$;
REVOKE ALL ON categories, tenants FROM cognis_analyst, cognis_auditor;
REVOKE USAGE ON SCHEMA public FROM cognis_analyst, cognis_auditor;
DROP FUNCTION IF EXISTS cognis_analyst_tenant();
DROP TABLE IF EXISTS analyst_tenants;
