-- Reverses analyst_views_v1.sql.
DROP FUNCTION IF EXISTS memories_as_of(text, timestamptz);
DROP FUNCTION IF EXISTS memory_chain(uuid);
DROP VIEW IF EXISTS memory_versions;
DROP VIEW IF EXISTS current_memories;
