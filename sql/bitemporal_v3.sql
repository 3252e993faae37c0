-- Bi-temporal history, third version (installed by migration 0016_reader_roles; v1 and v2 stay
-- as released). Changed from v2: memories_known_at reads memories itself instead of calling
-- memories_as_of, so removing the analysts' views and 0002's functions
-- (sql/analyst_views_v2_drop.sql) leaves it working, and in memories_true_at a version whose
-- event_time was inherited by a PATCH starts when it was recorded (v1 no longer reads as
-- never true), and a version ends at its event_end (memories.event_end, 0016) when it has one. Both functions run as their caller, so
-- row-level security shows the caller's tenant only.
--
--
-- Transaction time (created_at, superseded_at): when the system learned a version and when a
-- later version or a delete ended it. Event time (event_time): when the fact happened in the
-- world; a version without one counts from when it was recorded.

-- What the system knew at p_at: the versions recorded by then and not yet superseded then.
-- A memory imported today with an event_time in 2023 is NOT known "at 2023": it was learned
-- today. The same question as memories_as_of (0002), under a name that says which, and
-- answered without it.
CREATE OR REPLACE FUNCTION memories_known_at(p_user_id text, p_at timestamptz)
RETURNS TABLE (
    id uuid, chain_id uuid, version integer, content text, category text, scope text,
    session_id text, event_time timestamptz, recorded_at timestamptz,
    superseded_at timestamptz
)
LANGUAGE sql STABLE AS $$
    SELECT m.id, m.chain_id, m.version, m.content, m.category, m.scope, m.session_id,
           m.event_time, m.created_at, m.superseded_at
    FROM memories m
    WHERE m.user_id = p_user_id
      AND m.created_at <= p_at
      AND (m.superseded_at IS NULL OR m.superseded_at > p_at)
    ORDER BY m.created_at, m.id;
$$;

-- What was true in the world at p_at, as the system knows it now. A version holds in event
-- time from its start until the start of the version that replaced it or its event_end,
-- whichever is first; a deleted chain's last version holds until its event_end (a DELETE that
-- said when the fact ended) or else until the delete was recorded (a retraction); the current
-- version holds on, or until its event_end. A version starts at its event_time (else its
-- created_at), except one that changed the content and inherited its predecessor's event_time
-- (a PATCH that did not say when the world changed), which starts when it was recorded, so
-- the version it replaced holds until then. A correction dated earlier than
-- the version it replaces makes that version's interval empty: it was never true.
CREATE OR REPLACE FUNCTION memories_true_at(p_user_id text, p_at timestamptz)
RETURNS TABLE (
    id uuid, chain_id uuid, version integer, content text, category text, scope text,
    session_id text, true_from timestamptz, true_until timestamptz, recorded_at timestamptz
)
LANGUAGE sql STABLE AS $$
    WITH versions AS (
        SELECT m.id, m.chain_id, m.version, m.content, m.category, m.scope, m.session_id,
               m.replaces_id, m.created_at, m.superseded_at, m.event_end,
               CASE
                   WHEN p.id IS NOT NULL AND m.event_time IS NOT DISTINCT FROM p.event_time
                        AND m.content <> p.content
                       THEN m.created_at
                   ELSE coalesce(m.event_time, m.created_at)
               END AS starts
        FROM memories m
        LEFT JOIN memories p ON p.id = m.replaces_id AND p.user_id = m.user_id
        WHERE m.user_id = p_user_id
    ),
    spans AS (
        SELECT v.id, v.chain_id, v.version, v.content, v.category, v.scope, v.session_id,
               v.starts AS true_from,
               CASE
                   WHEN n.id IS NOT NULL THEN least(n.starts, v.event_end)
                   ELSE coalesce(v.event_end, v.superseded_at)
               END AS true_until,
               v.created_at AS recorded_at
        FROM versions v
        LEFT JOIN versions n ON n.replaces_id = v.id
    )
    SELECT s.id, s.chain_id, s.version, s.content, s.category, s.scope, s.session_id,
           s.true_from, s.true_until, s.recorded_at
    FROM spans s
    WHERE s.true_from <= p_at
      AND (s.true_until IS NULL OR s.true_until > p_at)
    ORDER BY s.true_from, s.id;
$$;

COMMENT ON FUNCTION memories_known_at(text, timestamptz) IS
    'What the system knew about a user at p_at (transaction time): versions recorded by then and not yet superseded then.';
COMMENT ON FUNCTION memories_true_at(text, timestamptz) IS
    'What was true in the world for a user at p_at, as the system knows it now (event time), with each version''s true_from and true_until.';
