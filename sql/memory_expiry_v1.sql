-- Cognis Memory: expiry (installed by migration 0017_memory_expiry). memories.expires_at is
-- added by the migration itself; this file holds the reaper's audit table, its row-level
-- security (the same policies as every table the service keeps), its grants and the comments
-- analysts read. Written to be rerun (IF NOT EXISTS, DROP ... IF EXISTS).

CREATE TABLE IF NOT EXISTS memory_expiries (
    tenant_id uuid NOT NULL DEFAULT cognis_tenant(),
    chain_id uuid NOT NULL,
    user_id text NOT NULL,
    versions integer NOT NULL,
    expires_at timestamptz NOT NULL,
    reaped_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT memory_expiries_pkey PRIMARY KEY (tenant_id, chain_id)
);

-- A new, empty table: a plain build takes no time.
CREATE INDEX IF NOT EXISTS memory_expiries_user_id_reaped_at_idx
    ON memory_expiries (user_id, reaped_at);

ALTER TABLE memory_expiries ENABLE ROW LEVEL SECURITY;
ALTER TABLE memory_expiries FORCE ROW LEVEL SECURITY;

DROP POLICY IF EXISTS memory_expiries_tenant_isolation ON memory_expiries;
CREATE POLICY memory_expiries_tenant_isolation ON memory_expiries
    USING (tenant_id = cognis_tenant()) WITH CHECK (tenant_id = cognis_tenant());
DROP POLICY IF EXISTS memory_expiries_background_claims ON memory_expiries;
CREATE POLICY memory_expiries_background_claims ON memory_expiries TO cognis_background
    USING (cognis_tenant() IS NULL) WITH CHECK (cognis_tenant() IS NULL);
DROP POLICY IF EXISTS memory_expiries_analyst_read ON memory_expiries;
CREATE POLICY memory_expiries_analyst_read ON memory_expiries FOR SELECT TO cognis_analyst
    USING (tenant_id = cognis_analyst_tenant());
DROP POLICY IF EXISTS memory_expiries_analyst_bound ON memory_expiries;
CREATE POLICY memory_expiries_analyst_bound ON memory_expiries AS RESTRICTIVE TO cognis_analyst
    USING (tenant_id = cognis_analyst_tenant()) WITH CHECK (false);
DROP POLICY IF EXISTS memory_expiries_auditor_read ON memory_expiries;
CREATE POLICY memory_expiries_auditor_read ON memory_expiries FOR SELECT TO cognis_auditor
    USING (true);

-- An erase (a request's role) deletes the user's rows; the reaper (background) inserts them.
GRANT SELECT, INSERT, UPDATE, DELETE ON memory_expiries TO cognis_rw;
GRANT SELECT ON memory_expiries TO cognis_analyst, cognis_auditor;

COMMENT ON COLUMN memories.expires_at IS 'When the memory expires: from then on no read shows it, and the reaper deletes it (every version) from Postgres and OpenSearch, leaving a memory_expiries row. The same on every version of a chain. NULL: never.';

COMMENT ON TABLE memory_expiries IS
    'One row per memory the expiry reaper removed: which chain of which user, how many versions, when it expired and when it was removed. Like an erase, it keeps no content. Deleted with the user by an erase.';
COMMENT ON COLUMN memory_expiries.tenant_id IS 'The tenant the row belongs to (tenants.id).';
COMMENT ON COLUMN memory_expiries.chain_id IS 'The removed memory''s chain (the id of its version 1).';
COMMENT ON COLUMN memory_expiries.user_id IS 'The user the memory was about, unique within its tenant only.';
COMMENT ON COLUMN memory_expiries.versions IS 'How many versions of the chain were removed.';
COMMENT ON COLUMN memory_expiries.expires_at IS 'When the memory expired (memories.expires_at).';
COMMENT ON COLUMN memory_expiries.reaped_at IS 'When the reaper removed it from Postgres (its documents leave OpenSearch through the outbox).';
