-- memories_known_at, second definition (0015_frozen_sql): the same rows as bitemporal_v1.sql's,
-- read from memories_as_of (0002) rather than repeating its query. Released files are frozen
-- (tests/test_frozen_sql.py): a later change goes in a new file and a new revision.

-- What the system knew at p_at: the versions recorded by then and not yet superseded then.
-- A memory imported today with an event_time in 2023 is NOT known "at 2023": it was learned
-- today. The same question as memories_as_of (0002), under a name that says which.
CREATE OR REPLACE FUNCTION memories_known_at(p_user_id text, p_at timestamptz)
RETURNS TABLE (
    id uuid, chain_id uuid, version integer, content text, category text, scope text,
    session_id text, event_time timestamptz, recorded_at timestamptz,
    superseded_at timestamptz
)
LANGUAGE sql STABLE AS $$
    SELECT a.id, a.chain_id, a.version, a.content, a.category, a.scope, a.session_id,
           a.event_time, a.valid_from, a.valid_to
    FROM memories_as_of(p_user_id, p_at) a;
$$;
