-- Cognis Memory: the analysts' views, second version (installed by migration 0016_reader_roles;
-- the first, sql/analyst_views_v1.sql, stays as released). Both views now run with the
-- privileges and row-level security of whoever queries them (security_invoker), so granting
-- one to a reader shows that reader's tenant only, and they carry tenant_id. The functions of
-- v1 (memory_chain, memories_as_of) already ran as their caller and are unchanged.

CREATE OR REPLACE VIEW current_memories WITH (security_invoker = true) AS
SELECT id, user_id, chain_id, version, content, category, scope, session_id, speaker,
       event_time, created_at, metadata, source_message_id, tenant_id, event_end
FROM memories
WHERE is_current;

CREATE OR REPLACE VIEW memory_versions WITH (security_invoker = true) AS
SELECT m.id, m.user_id, m.chain_id, m.version, m.content, m.category, m.scope, m.session_id,
       m.speaker, m.event_time, m.created_at AS valid_from, m.superseded_at AS valid_to,
       m.is_current, m.replaces_id, n.id AS replaced_by_id,
       CASE
           WHEN m.is_current THEN 'current'
           WHEN n.id IS NOT NULL THEN 'updated'
           ELSE 'deleted'
       END AS status,
       m.tenant_id, m.event_end
FROM memories m
LEFT JOIN memories n ON n.replaces_id = m.id;

GRANT SELECT ON current_memories, memory_versions TO cognis_analyst, cognis_auditor;

COMMENT ON VIEW current_memories IS
    'Every user''s current memories (one row per chain). Runs as the caller: row-level security shows the caller''s tenant only. Filter by user_id.';
COMMENT ON COLUMN current_memories.id IS 'The current version''s id.';
COMMENT ON COLUMN current_memories.user_id IS 'The user the memory is about, unique within its tenant only.';
COMMENT ON COLUMN current_memories.chain_id IS 'The memory''s chain: the id of its version 1, shared by all its versions.';
COMMENT ON COLUMN current_memories.version IS 'Version number within the chain, from 1.';
COMMENT ON COLUMN current_memories.content IS 'The fact, as one sentence.';
COMMENT ON COLUMN current_memories.category IS 'Its category (categories.name).';
COMMENT ON COLUMN current_memories.scope IS 'USER (the user''s own) or CONTEXT (bound to one session).';
COMMENT ON COLUMN current_memories.session_id IS 'The session of a CONTEXT memory (else the session it came from, if any).';
COMMENT ON COLUMN current_memories.speaker IS 'Who said it, as the message named them.';
COMMENT ON COLUMN current_memories.event_time IS 'Event time: when the fact began in the world, NULL: counts from created_at.';
COMMENT ON COLUMN current_memories.created_at IS 'Transaction time: when this version was recorded.';
COMMENT ON COLUMN current_memories.metadata IS 'Caller-supplied JSON kept with the memory.';
COMMENT ON COLUMN current_memories.source_message_id IS 'The message it was extracted from (messages.id), if any.';
COMMENT ON COLUMN current_memories.tenant_id IS 'The tenant the row belongs to (tenants.id).';
COMMENT ON COLUMN current_memories.event_end IS 'Event time: when the fact stopped holding in the world (PATCH with event_end). NULL: not ended.';

COMMENT ON VIEW memory_versions IS
    'Every version of every memory with its transaction-time interval [valid_from, valid_to) and what ended it. Runs as the caller (row-level security). Filter by user_id.';
COMMENT ON COLUMN memory_versions.id IS 'The version''s id.';
COMMENT ON COLUMN memory_versions.user_id IS 'The user the memory is about, unique within its tenant only.';
COMMENT ON COLUMN memory_versions.chain_id IS 'The memory''s chain: the id of its version 1.';
COMMENT ON COLUMN memory_versions.version IS 'Version number within the chain, from 1.';
COMMENT ON COLUMN memory_versions.content IS 'The fact, as this version said it.';
COMMENT ON COLUMN memory_versions.category IS 'Its category (categories.name).';
COMMENT ON COLUMN memory_versions.scope IS 'USER or CONTEXT.';
COMMENT ON COLUMN memory_versions.session_id IS 'The session of a CONTEXT memory.';
COMMENT ON COLUMN memory_versions.speaker IS 'Who said it.';
COMMENT ON COLUMN memory_versions.event_time IS 'Event time: when the fact began in the world, NULL: counts from valid_from.';
COMMENT ON COLUMN memory_versions.valid_from IS 'Transaction time: when this version was recorded (memories.created_at).';
COMMENT ON COLUMN memory_versions.valid_to IS 'Transaction time: when an update or a delete ended it (memories.superseded_at), NULL while current. Not the end of the fact in the world.';
COMMENT ON COLUMN memory_versions.is_current IS 'True for the chain''s current version.';
COMMENT ON COLUMN memory_versions.replaces_id IS 'The version this one replaced, NULL for version 1.';
COMMENT ON COLUMN memory_versions.replaced_by_id IS 'The version that replaced this one, NULL if current or deleted.';
COMMENT ON COLUMN memory_versions.status IS 'current, updated (has a successor) or deleted (ended without one).';
COMMENT ON COLUMN memory_versions.tenant_id IS 'The tenant the row belongs to (tenants.id).';
COMMENT ON COLUMN memory_versions.event_end IS 'Event time: when the fact stopped holding in the world (PATCH or DELETE with event_end). A deleted version without one was retracted.';

COMMENT ON FUNCTION memory_chain(uuid) IS
    'The whole chain of any version, oldest first, found by walking replaces_id both ways. Runs as the caller.';
COMMENT ON FUNCTION memories_as_of(text, timestamptz) IS
    'What the system knew about a user at a moment (transaction time): versions recorded by then and not superseded then. Same as memories_known_at.';
