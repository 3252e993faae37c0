-- Cognis Memory: the audit table of scoped erases (installed by migration 0019_scope_erasures).
-- An erase of one agent's or one run's memories and messages of a user (DELETE
-- /v1/users/{u}?agent_id=&run_id=) leaves one row here: who, which scope, how much, when; no
-- content. Row-level security as on every table the service keeps, grants, and the comments
-- analysts read. Written to be rerun (IF NOT EXISTS, DROP ... IF EXISTS).

CREATE TABLE IF NOT EXISTS scope_erasures (
    tenant_id uuid NOT NULL DEFAULT cognis_tenant(),
    id bigint GENERATED ALWAYS AS IDENTITY,
    user_id text NOT NULL,
    agent_id text,
    run_id text,
    memories integer NOT NULL,
    versions integer NOT NULL,
    messages integer NOT NULL,
    erased_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT scope_erasures_pkey PRIMARY KEY (id),
    CONSTRAINT scope_erasures_names_a_scope_check CHECK (agent_id IS NOT NULL OR run_id IS NOT NULL)
);

-- A new, empty table: a plain build takes no time.
CREATE INDEX IF NOT EXISTS scope_erasures_user_id_erased_at_idx
    ON scope_erasures (user_id, erased_at);

ALTER TABLE scope_erasures ENABLE ROW LEVEL SECURITY;
ALTER TABLE scope_erasures FORCE ROW LEVEL SECURITY;

DROP POLICY IF EXISTS scope_erasures_tenant_isolation ON scope_erasures;
CREATE POLICY scope_erasures_tenant_isolation ON scope_erasures
    USING (tenant_id = cognis_tenant()) WITH CHECK (tenant_id = cognis_tenant());
DROP POLICY IF EXISTS scope_erasures_background_claims ON scope_erasures;
CREATE POLICY scope_erasures_background_claims ON scope_erasures TO cognis_background
    USING (cognis_tenant() IS NULL) WITH CHECK (cognis_tenant() IS NULL);
DROP POLICY IF EXISTS scope_erasures_analyst_read ON scope_erasures;
CREATE POLICY scope_erasures_analyst_read ON scope_erasures FOR SELECT TO cognis_analyst
    USING (tenant_id = cognis_analyst_tenant());
DROP POLICY IF EXISTS scope_erasures_analyst_bound ON scope_erasures;
CREATE POLICY scope_erasures_analyst_bound ON scope_erasures AS RESTRICTIVE TO cognis_analyst
    USING (tenant_id = cognis_analyst_tenant()) WITH CHECK (false);
DROP POLICY IF EXISTS scope_erasures_auditor_read ON scope_erasures;
CREATE POLICY scope_erasures_auditor_read ON scope_erasures FOR SELECT TO cognis_auditor
    USING (true);

-- A scoped erase (a request's role) inserts a row; an erase of the whole user deletes them.
GRANT SELECT, INSERT, UPDATE, DELETE ON scope_erasures TO cognis_rw;
GRANT SELECT ON scope_erasures TO cognis_analyst, cognis_auditor;

COMMENT ON TABLE scope_erasures IS
    'One row per scoped erase: the memories and messages of one agent and/or run of a user removed from Postgres (and through the outbox from OpenSearch). Like every erase, it keeps no content. Deleted with the user by an erase of the whole user.';
COMMENT ON COLUMN scope_erasures.tenant_id IS 'The tenant the row belongs to (tenants.id).';
COMMENT ON COLUMN scope_erasures.id IS 'The erase, in the order they ran.';
COMMENT ON COLUMN scope_erasures.user_id IS 'The user whose agent or run was erased, unique within its tenant only.';
COMMENT ON COLUMN scope_erasures.agent_id IS 'The agent erased (NULL: every agent''s memories of the run in run_id).';
COMMENT ON COLUMN scope_erasures.run_id IS 'The run erased (NULL: every run''s memories of the agent in agent_id). Both set: that agent''s memories of that run.';
COMMENT ON COLUMN scope_erasures.memories IS 'How many memories (version chains) were removed.';
COMMENT ON COLUMN scope_erasures.versions IS 'How many memory versions were removed.';
COMMENT ON COLUMN scope_erasures.messages IS 'How many messages (with their ingestion tasks and decisions) were removed.';
COMMENT ON COLUMN scope_erasures.erased_at IS 'When the erase committed in Postgres (the documents leave OpenSearch through the outbox).';
