-- Cognis Memory: views and functions for analysts (installed by migration 0002_analyst_views).
-- Each memory row is one version; [created_at, superseded_at) is the interval it was current.

-- Every user's memories as they stand now.
CREATE OR REPLACE VIEW current_memories AS
SELECT id, user_id, chain_id, version, content, category, scope, session_id, speaker,
       event_time, created_at, metadata, source_message_id
FROM memories
WHERE is_current;

-- Every version with its validity interval and what ended it.
CREATE OR REPLACE VIEW memory_versions AS
SELECT m.id, m.user_id, m.chain_id, m.version, m.content, m.category, m.scope, m.session_id,
       m.speaker, m.event_time, m.created_at AS valid_from, m.superseded_at AS valid_to,
       m.is_current, m.replaces_id, n.id AS replaced_by_id,
       CASE
           WHEN m.is_current THEN 'current'
           WHEN n.id IS NOT NULL THEN 'updated'
           ELSE 'deleted'
       END AS status
FROM memories m
LEFT JOIN memories n ON n.replaces_id = m.id;

-- The full version chain of any memory, oldest first, found by walking replaces_id in both
-- directions from the given version (not by trusting chain_id).
CREATE OR REPLACE FUNCTION memory_chain(p_memory_id uuid)
RETURNS TABLE (
    id uuid, user_id text, version integer, content text, category text, scope text,
    replaces_id uuid, is_current boolean, valid_from timestamptz, valid_to timestamptz
)
LANGUAGE sql STABLE AS $$
    WITH RECURSIVE older AS (
        SELECT m.* FROM memories m WHERE m.id = p_memory_id
        UNION ALL
        SELECT p.* FROM memories p JOIN older o ON p.id = o.replaces_id
    ),
    newer AS (
        SELECT m.* FROM memories m WHERE m.id = p_memory_id
        UNION ALL
        SELECT c.* FROM memories c JOIN newer n ON c.replaces_id = n.id
    ),
    chain AS (
        SELECT * FROM older
        UNION
        SELECT * FROM newer
    )
    SELECT c.id, c.user_id, c.version, c.content, c.category, c.scope, c.replaces_id,
           c.is_current, c.created_at, c.superseded_at
    FROM chain c
    ORDER BY c.version;
$$;

-- A user's memories as they stood at a past moment: versions current at p_as_of.
CREATE OR REPLACE FUNCTION memories_as_of(p_user_id text, p_as_of timestamptz)
RETURNS TABLE (
    id uuid, chain_id uuid, version integer, content text, category text, scope text,
    session_id text, event_time timestamptz, valid_from timestamptz, valid_to timestamptz
)
LANGUAGE sql STABLE AS $$
    SELECT m.id, m.chain_id, m.version, m.content, m.category, m.scope, m.session_id,
           m.event_time, m.created_at, m.superseded_at
    FROM memories m
    WHERE m.user_id = p_user_id
      AND m.created_at <= p_as_of
      AND (m.superseded_at IS NULL OR m.superseded_at > p_as_of)
    ORDER BY m.created_at, m.id;
$$;
