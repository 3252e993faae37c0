-- Cognis Memory: the durable jobs of batch creates (installed by migration 0022_batch_jobs).
-- POST /v1/users/{u}/memories/batch answers 202 with one of these when its memories need more
-- model time than the request's deadline: the validated batch is kept here, in the request's
-- transaction, and a worker (FOR UPDATE SKIP LOCKED, leased like ingest_tasks) writes the
-- memories later in one transaction. Row-level security as on every table the service keeps,
-- grants, and the comments analysts read. Written to be rerun (IF NOT EXISTS, DROP ... IF
-- EXISTS).

CREATE TABLE IF NOT EXISTS batch_jobs (
    tenant_id uuid NOT NULL DEFAULT cognis_tenant(),
    id uuid NOT NULL,
    user_id text NOT NULL,
    queue text NOT NULL DEFAULT 'default',
    batch jsonb NOT NULL,
    memories integer NOT NULL,
    status text NOT NULL DEFAULT 'queued',
    attempts integer NOT NULL DEFAULT 0,
    error text,
    available_at timestamptz NOT NULL DEFAULT now(),
    lease_token uuid,
    lease_expires_at timestamptz,
    memory_ids uuid[],
    created_at timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz,
    CONSTRAINT batch_jobs_pkey PRIMARY KEY (id),
    CONSTRAINT batch_jobs_status_check CHECK (status IN ('queued', 'running', 'done', 'failed'))
);

-- A new, empty table: plain builds take no time. The queues: the open jobs, oldest first.
CREATE INDEX IF NOT EXISTS batch_jobs_open_idx
    ON batch_jobs (queue, created_at) WHERE status IN ('queued', 'running');
CREATE INDEX IF NOT EXISTS batch_jobs_user_id_idx ON batch_jobs (user_id);

ALTER TABLE batch_jobs ENABLE ROW LEVEL SECURITY;
ALTER TABLE batch_jobs FORCE ROW LEVEL SECURITY;

DROP POLICY IF EXISTS batch_jobs_tenant_isolation ON batch_jobs;
CREATE POLICY batch_jobs_tenant_isolation ON batch_jobs
    USING (tenant_id = cognis_tenant()) WITH CHECK (tenant_id = cognis_tenant());
DROP POLICY IF EXISTS batch_jobs_background_claims ON batch_jobs;
CREATE POLICY batch_jobs_background_claims ON batch_jobs TO cognis_background
    USING (cognis_tenant() IS NULL) WITH CHECK (cognis_tenant() IS NULL);
DROP POLICY IF EXISTS batch_jobs_analyst_read ON batch_jobs;
CREATE POLICY batch_jobs_analyst_read ON batch_jobs FOR SELECT TO cognis_analyst
    USING (tenant_id = cognis_analyst_tenant());
DROP POLICY IF EXISTS batch_jobs_analyst_bound ON batch_jobs;
CREATE POLICY batch_jobs_analyst_bound ON batch_jobs AS RESTRICTIVE TO cognis_analyst
    USING (tenant_id = cognis_analyst_tenant()) WITH CHECK (false);
DROP POLICY IF EXISTS batch_jobs_auditor_read ON batch_jobs;
CREATE POLICY batch_jobs_auditor_read ON batch_jobs FOR SELECT TO cognis_auditor
    USING (true);

-- A request's role queues and reads jobs and an erase deletes them; the worker's role
-- (cognis_background, a member of cognis_rw) claims and finishes them.
GRANT SELECT, INSERT, UPDATE, DELETE ON batch_jobs TO cognis_rw;
GRANT SELECT ON batch_jobs TO cognis_analyst, cognis_auditor;

COMMENT ON TABLE batch_jobs IS
    'One row per batch create answered 202: its validated memories, waiting for a worker to write them in one transaction (too much model work for the request''s deadline). Deleted with the user by an erase of the whole user.';
COMMENT ON COLUMN batch_jobs.tenant_id IS 'The tenant the row belongs to (tenants.id).';
COMMENT ON COLUMN batch_jobs.id IS 'The job (the 202''s job_id).';
COMMENT ON COLUMN batch_jobs.user_id IS 'The user whose memories it writes, unique within its tenant only.';
COMMENT ON COLUMN batch_jobs.queue IS 'The job queue of the process that accepted it (COGNIS_INGEST_QUEUE): only workers of that queue take it.';
COMMENT ON COLUMN batch_jobs.batch IS 'The memories to write, validated, as JSON (their content included) while the job is in flight: emptied once it is done or failed, so that a finished job keeps no content.';
COMMENT ON COLUMN batch_jobs.memories IS 'How many memories the batch holds.';
COMMENT ON COLUMN batch_jobs.status IS 'queued, running, done or failed.';
COMMENT ON COLUMN batch_jobs.attempts IS 'How many times a worker took it.';
COMMENT ON COLUMN batch_jobs.error IS 'Why the last attempt failed (failed: why it was given up).';
COMMENT ON COLUMN batch_jobs.available_at IS 'When it may be taken (later after a failed attempt: backoff).';
COMMENT ON COLUMN batch_jobs.lease_token IS 'The claim of the worker running it.';
COMMENT ON COLUMN batch_jobs.lease_expires_at IS 'When another worker may take it over (the running one renews it).';
COMMENT ON COLUMN batch_jobs.memory_ids IS 'The memories it wrote (memories.id), in batch order (NULL until done).';
COMMENT ON COLUMN batch_jobs.created_at IS 'When the request was accepted.';
COMMENT ON COLUMN batch_jobs.finished_at IS 'When it was done or given up.';
